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
from dataclasses import dataclass
from typing import TypeVar

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from powertrip import metrics
from powertrip.errors import PowerTripError
from powertrip.fl.params import InvalidUpdateError
from powertrip.proto.v1 import site_pb2
from powertrip.site.power import PowerError, PowerReading
from powertrip.site.worker import SiteWorker, TrainOrder
from powertrip.transport.payload import (
    MAX_CHUNK_BYTES,
    Payload,
    decode_params,
    encode_params,
)
from powertrip.transport.servers import build_server, unary
from powertrip.transport.streams import raw_frames, read_train, update_frames

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


class SiteActivity:
    """Counters of the site's rounds, compute time and bytes moved."""

    def __init__(self) -> None:
        self.rounds = 0
        self.compute_s = 0.0
        self.received_bytes = 0
        self.sent_bytes = 0
        self._lock = threading.Lock()

    def add(self, received_bytes: int, compute_s: float) -> None:
        """A round trained on a model of `received_bytes`."""
        with self._lock:
            self.rounds += 1
            self.compute_s += compute_s
            self.received_bytes += received_bytes

    def sent(self, size: int) -> None:
        """An update of `size` bytes went back."""
        with self._lock:
            self.sent_bytes += size


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
        self.activity = SiteActivity()

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

    def read_power(self) -> tuple[PowerReading, float]:
        """Power now, and the energy drawn since the server started (the draw integrated
        between readings)."""
        reading = self.worker.read_power()
        with self._energy_lock:
            now = time.monotonic()
            self._energy_j += reading.power_w * (now - self._last_read_s)
            self._last_read_s = now
            return reading, self._energy_j

    def status(
        self, request: site_pb2.StatusRequest, context: grpc.ServicerContext
    ) -> site_pb2.SiteStatus:
        """Power now, and the energy drawn since the server started."""
        reading, energy = self._guard(context, self.read_power)
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
                local_epochs=header.local_epochs or None,
            )
            result = self.worker.train(order, decode_params(payload, peer), peer)
            self.activity.add(len(payload), result.compute_time_s)
            reply = site_pb2.UpdateHeader(
                site_id=self.identity.site_id,
                num_samples=result.num_samples,
                compute_time_s=result.compute_time_s,
                power_available_ratio=result.power_available_ratio,
            )
            return reply, encode_params(result.update)

        reply, update = self._guard(context, run)
        yield from update_frames(reply, update)
        self.activity.sent(update.nbytes)

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
        if request.total_bytes > MAX_DOWNLOAD_BYTES or not 0 < chunk <= MAX_CHUNK_BYTES:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"download of {request.total_bytes} bytes in chunks of {chunk}: at most "
                f"{MAX_DOWNLOAD_BYTES} bytes in chunks of 1..{MAX_CHUNK_BYTES}",
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
    handlers = {
        "Describe": unary(servicer.describe, site_pb2.DescribeRequest, site_pb2.SiteDescription),
        "Status": unary(servicer.status, site_pb2.StatusRequest, site_pb2.SiteStatus),
        "Train": grpc.stream_stream_rpc_method_handler(
            servicer.train, request_deserializer=raw_frames, response_serializer=raw_frames
        ),
        "Echo": unary(servicer.echo, site_pb2.EchoRequest, site_pb2.EchoReply),
        "Download": grpc.unary_stream_rpc_method_handler(
            servicer.download,
            request_deserializer=site_pb2.DownloadRequest.FromString,
            response_serializer=site_pb2.DataChunk.SerializeToString,
        ),
    }
    return build_server(SERVICE_NAME, handlers, address, max_workers)


class SiteCollector(Collector):
    """The site's power, energy, rounds and traffic as Prometheus series, read at scrape."""

    def __init__(self, servicer: SiteServicer) -> None:
        self.servicer = servicer

    def collect(self) -> Iterator[Metric]:
        """One sample per series, labelled with the site's id."""
        site = [self.servicer.identity.site_id]
        activity = self.servicer.activity
        try:
            reading, energy_j = self.servicer.read_power()
        except PowerError as error:
            log.warning("metrics: %s", error)
        else:
            for name, documentation, value in (
                (
                    metrics.SITE_POWER_AVAILABLE,
                    "Power the site may draw, over its maximum.",
                    reading.power_available_ratio,
                ),
                (metrics.SITE_POWER_WATTS, "Power the site draws.", reading.power_w),
            ):
                gauge = GaugeMetricFamily(name, documentation, labels=["site_id"])
                gauge.add_metric(site, value)
                yield gauge
            energy = CounterMetricFamily(
                metrics.SITE_ENERGY, "Energy drawn since the site started.", labels=["site_id"]
            )
            energy.add_metric(site, energy_j)
            yield energy
        rounds = CounterMetricFamily(
            "powertrip_site_rounds", "Rounds this site trained.", labels=["site_id"]
        )
        rounds.add_metric(site, activity.rounds)
        yield rounds
        compute = CounterMetricFamily(
            "powertrip_site_compute_seconds",
            "Local training time, power-stretched.",
            labels=["site_id"],
        )
        compute.add_metric(site, activity.compute_s)
        yield compute
        moved = CounterMetricFamily(
            metrics.TRANSFER_BYTES,
            "Model bytes received and update bytes sent.",
            labels=["site_id", "direction"],
        )
        moved.add_metric([*site, "received"], activity.received_bytes)
        moved.add_metric([*site, "sent"], activity.sent_bytes)
        yield moved
