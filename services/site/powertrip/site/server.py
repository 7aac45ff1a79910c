"""The site's gRPC server: a thin layer over `SiteWorker` (site.proto).

Wire <-> domain conversion happens here and only here; domain errors become gRPC status codes
through one table. The Train method carries raw frames (powertrip.transport.streams), the
other methods plain protobuf messages. Every server also serves the standard gRPC health
service.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from powertrip.errors import PowerTripError
from powertrip.fl.params import InvalidUpdateError
from powertrip.proto.v1 import site_pb2
from powertrip.site.power import PowerError
from powertrip.site.worker import SiteWorker, TrainOrder
from powertrip.transport.payload import (
    DEFAULT_CHUNK_BYTES,
    Payload,
    decode_params,
    encode_params,
)
from powertrip.transport.streams import GRPC_OPTIONS, raw_frames, read_train, update_frames

log = logging.getLogger(__name__)
SERVICE_NAME = "powertrip.proto.v1.SiteService"
MAX_DOWNLOAD_BYTES = 2**30

# Domain errors -> gRPC status codes, most specific first.
STATUS_OF: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (InvalidUpdateError, grpc.StatusCode.INVALID_ARGUMENT),
    (PowerError, grpc.StatusCode.UNAVAILABLE),
    (PowerTripError, grpc.StatusCode.FAILED_PRECONDITION),
)

Reply = TypeVar("Reply")


@dataclass(frozen=True)
class SiteIdentity:
    """What a site says about itself."""

    site_id: str
    distance_km: float = 0.0
    gpus: int = 1
    gpu_power_w: float = 300.0


def _status_code(error: Exception) -> grpc.StatusCode | None:
    return next((code for kind, code in STATUS_OF if isinstance(error, kind)), None)


class SiteServicer:
    """Handlers of site.proto, each one call into the worker."""

    def __init__(self, identity: SiteIdentity, worker: SiteWorker) -> None:
        self.identity = identity
        self.worker = worker
        self._energy_lock = threading.Lock()
        self._energy_j = 0.0
        self._last_read_s = time.monotonic()

    def _guard(self, context: grpc.ServicerContext, action: Callable[[], Reply]) -> Reply:
        try:
            return action()
        except Exception as error:
            code = _status_code(error)
            if code is None:
                raise
            log.warning("%s: %s", code.name, error)
            context.abort(code, str(error))
            raise  # abort raises; this keeps type checkers informed

    def describe(
        self, request: site_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> site_pb2.SiteDescription:
        """Identity, hardware, place and shard size."""
        return site_pb2.SiteDescription(
            site_id=self.identity.site_id,
            gpus=self.identity.gpus,
            gpu_power_w=self.identity.gpu_power_w,
            distance_km=self.identity.distance_km,
            num_samples=self.worker.num_samples,
            device=str(self.worker.device),
        )

    def status(
        self, request: site_pb2.StatusRequest, context: grpc.ServicerContext
    ) -> site_pb2.SiteStatus:
        """Power now, and the energy drawn since the server started."""
        reading = self._guard(context, self.worker.read_power)
        with self._energy_lock:
            now = time.monotonic()
            self._energy_j += reading.power_w * (now - self._last_read_s)
            self._last_read_s = now
            energy = self._energy_j
        return site_pb2.SiteStatus(
            site_id=self.identity.site_id,
            power_available_ratio=reading.power_available_ratio,
            power_w=reading.power_w,
            power_limit_w=reading.power_limit_w,
            power_source=reading.source,
            energy_j=energy,
        )

    def train(self, frames: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        """Receive the global model, train, stream the update back."""

        def run() -> tuple[site_pb2.UpdateHeader, Payload]:
            peer = context.peer()
            header, payload = read_train(frames, peer)
            order = TrainOrder(
                round_index=header.round_index,
                local_steps=header.local_steps or 1,
                batch_size=header.batch_size or 32,
                learning_rate=header.learning_rate or 0.05,
                power_cap_ratio=header.power_cap_ratio or None,
                seed=header.seed,
            )
            result = self.worker.train(order, decode_params(payload, peer), peer)
            reply = site_pb2.UpdateHeader(
                site_id=self.identity.site_id,
                num_samples=result.num_samples,
                compute_time_s=result.compute_time_s,
                power_available_ratio=result.power_available_ratio,
            )
            return reply, encode_params(result.update)

        reply, update = self._guard(context, run)
        yield from update_frames(reply, update)

    def echo(
        self, request: site_pb2.EchoRequest, context: grpc.ServicerContext
    ) -> site_pb2.EchoReply:
        """The payload straight back (RTT probe)."""
        return site_pb2.EchoReply(payload=request.payload)

    def download(
        self, request: site_pb2.DownloadRequest, context: grpc.ServicerContext
    ) -> Iterator[site_pb2.DataChunk]:
        """`total_bytes` in chunks of `chunk_bytes` (bandwidth probe)."""
        chunk = request.chunk_bytes or 2**20
        if request.total_bytes > MAX_DOWNLOAD_BYTES or not 0 < chunk <= DEFAULT_CHUNK_BYTES:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"download of {request.total_bytes} bytes in chunks of {chunk}: at most "
                f"{MAX_DOWNLOAD_BYTES} bytes in chunks of 1..{DEFAULT_CHUNK_BYTES}",
            )
        block = bytes(chunk)
        remaining = request.total_bytes
        while remaining > 0:
            size = min(chunk, remaining)
            yield site_pb2.DataChunk(data=block if size == chunk else block[:size])
            remaining -= size


def create_server(
    servicer: SiteServicer, address: str = "127.0.0.1:0", max_workers: int = 8
) -> tuple[grpc.Server, int]:
    """A server for `servicer` (not started yet: call `start()`) and the port it bound."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=GRPC_OPTIONS)
    handlers: dict[str, Any] = {
        "Describe": grpc.unary_unary_rpc_method_handler(
            servicer.describe,
            request_deserializer=site_pb2.DescribeRequest.FromString,
            response_serializer=site_pb2.SiteDescription.SerializeToString,
        ),
        "Status": grpc.unary_unary_rpc_method_handler(
            servicer.status,
            request_deserializer=site_pb2.StatusRequest.FromString,
            response_serializer=site_pb2.SiteStatus.SerializeToString,
        ),
        "Train": grpc.stream_stream_rpc_method_handler(
            servicer.train, request_deserializer=raw_frames, response_serializer=raw_frames
        ),
        "Echo": grpc.unary_unary_rpc_method_handler(
            servicer.echo,
            request_deserializer=site_pb2.EchoRequest.FromString,
            response_serializer=site_pb2.EchoReply.SerializeToString,
        ),
        "Download": grpc.unary_stream_rpc_method_handler(
            servicer.download,
            request_deserializer=site_pb2.DownloadRequest.FromString,
            response_serializer=site_pb2.DataChunk.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    health_servicer = health.HealthServicer()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise PowerTripError(f"cannot bind the site server to {address}")
    return server, port
