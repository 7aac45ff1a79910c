"""Building our gRPC servers (generic handlers, message limits, the health service) and
unary client stubs."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from powertrip.errors import PowerTripError
from powertrip.transport.streams import GRPC_OPTIONS


def build_server(
    service_name: str,
    handlers: Mapping[str, Any],
    address: str = "127.0.0.1:0",
    max_workers: int = 8,
) -> tuple[grpc.Server, int]:
    """A server for `service_name`'s method handlers plus the standard health service (both
    the server and the service report SERVING), not started yet, and the port it bound."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service_name, dict(handlers)),)
    )
    health_servicer = health.HealthServicer()
    for name in ("", service_name):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise PowerTripError(f"cannot bind the {service_name} server to {address}")
    return server, port


def unary_call(channel: grpc.Channel, path: str, request: Any, response: Any) -> Any:
    """A client stub for a unary-unary method over protobuf message classes."""
    return channel.unary_unary(
        path,
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString,
    )


def unary(method: Any, request: Any, response: Any) -> grpc.RpcMethodHandler[Any, Any]:
    """A unary-unary handler over protobuf message classes."""
    return grpc.unary_unary_rpc_method_handler(
        method,
        request_deserializer=request.FromString,
        response_serializer=response.SerializeToString,
    )
