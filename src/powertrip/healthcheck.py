"""Container healthchecks, light enough to run every few seconds (no torch, no typer):

    python -m powertrip.healthcheck grpc HOST:PORT   # the standard gRPC health service
    python -m powertrip.healthcheck http URL         # any 2xx

Exit 0 when healthy, 1 (with the reason on stderr) when not.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2

HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def grpc_problem(address: str, timeout_s: float) -> str | None:
    """Why the gRPC server at `address` is not SERVING, or None when it is."""
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary(
            HEALTH_CHECK,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            reply = check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"{address}: {error.code().name}: {error.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
    return None


def http_problem(url: str, timeout_s: float) -> str | None:
    """Why `url` does not answer 2xx, or None when it does."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status = int(response.status)
    except urllib.error.HTTPError as error:
        status = error.code
    except (urllib.error.URLError, OSError) as error:
        return f"{url}: {error}"
    return None if 200 <= status < 300 else f"{url}: HTTP {status}"


def main(argv: Sequence[str] | None = None) -> int:
    """Check once; the exit status is the verdict."""
    parser = argparse.ArgumentParser(prog="python -m powertrip.healthcheck")
    parser.add_argument("kind", choices=["grpc", "http"])
    parser.add_argument("target", help="HOST:PORT for grpc, a URL for http")
    parser.add_argument("--timeout-s", type=float, default=3.0)
    arguments = parser.parse_args(argv)
    check = grpc_problem if arguments.kind == "grpc" else http_problem
    problem = check(arguments.target, arguments.timeout_s)
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
