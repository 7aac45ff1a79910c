"""A site process: its worker, gRPC server, /metrics, and registration with the profiler."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from powertrip.errors import InvalidValueError
from powertrip.metrics import serve_metrics
from powertrip.netem import Applied, LinkShape, LinkShaper, ShapingError
from powertrip.process import announce
from powertrip.site.power import (
    ConstantPowerSource,
    NvmlPowerSource,
    PowerSource,
    TraceReplayPowerSource,
)
from powertrip.site.server import SiteCollector, SiteIdentity, SiteServicer, create_server
from powertrip.site.worker import ShardSpec, SiteWorker
from powertrip.transport.linkproxy import LinkProfile, LinkProxy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SiteSettings:
    """Everything a site process is started with."""

    identity: SiteIdentity
    shard: ShardSpec = field(default_factory=ShardSpec)
    host: str = "127.0.0.1"
    port: int = 0
    advertise: str | None = None
    profiler: str | None = None
    power_available_ratio: float = 1.0
    power_trace: Path | None = None
    trace_domain: int = 0
    trace_offset_steps: int = 0
    trace_step_s: float = 300.0
    gpu_index: int | None = None
    device: str = "cpu"
    metrics_port: int | None = None
    link: LinkShape | None = None
    link_device: str | None = None

    def power_source(self) -> PowerSource:
        """Constant or trace availability; through NVML when the site has a GPU index."""
        capacity_w = self.identity.gpus * self.identity.gpu_power_w
        schedule: PowerSource
        if self.power_trace is not None:
            from powertrip.traces.google import load_trace_dir

            traces = load_trace_dir(self.power_trace)
            if not 0 <= self.trace_domain < len(traces):
                raise InvalidValueError(
                    f"trace domain {self.trace_domain} does not exist: "
                    f"{self.power_trace} holds {len(traces)} power domains"
                )
            schedule = TraceReplayPowerSource(
                traces[self.trace_domain], capacity_w, self.trace_offset_steps, self.trace_step_s
            )
        else:
            schedule = ConstantPowerSource(self.power_available_ratio, capacity_w)
        if self.gpu_index is None:
            return schedule
        return NvmlPowerSource(schedule, self.gpu_index)


class SiteLink:
    """The site's own link profile: the kernel shapes what it can on `link_device`, and a
    userspace proxy in front of the gRPC port adds the rest (everything, with no device)."""

    def __init__(self, shape: LinkShape, device: str | None) -> None:
        self.shape = shape
        self.shaper = LinkShaper(device) if device else None
        self.applied: Applied | None = None
        self.proxy: LinkProxy | None = None

    def serve(self, servicer: SiteServicer, host: str, port: int) -> tuple[grpc.Server, int]:
        """Shape the device, then serve `servicer` at host:port: directly, or behind a proxy
        that adds what the kernel does not. Returns the server and the port others reach."""
        emulate = self._shape()
        if emulate is None:
            return _listen(servicer, host, port)
        server, inner_port = _listen(servicer, "127.0.0.1", 0)
        self.proxy = LinkProxy("127.0.0.1", inner_port, emulate, host, port).start()
        return server, self.proxy.port

    def _shape(self) -> LinkProfile | None:
        """Shape the device; returns what the proxy must still emulate (None: nothing)."""
        if self.shaper is None:
            log.warning("link: userspace proxy emulates %s", self.shape.describe())
            rate = self.shape.rate_bits_per_s
            return LinkProfile(self.shape.delay_s, None if rate is None else rate / 8)
        self.applied = self.shaper.apply(self.shape)
        log.warning("link: %s", self.applied.describe())
        delay = self.applied.userspace_delay_s
        return LinkProfile(delay) if delay else None

    def stop(self) -> None:
        """Stop the proxy and take the device's shaping off (a failure is logged, not raised)."""
        if self.proxy is not None:
            self.proxy.stop()
        if self.shaper is not None and self.applied is not None:
            try:
                self.shaper.clear()
            except ShapingError as error:
                log.error("link: could not clear shaping: %s", error)


def _listen(servicer: SiteServicer, host: str, port: int) -> tuple[grpc.Server, int]:
    """The site's gRPC server, started at host:port (0: any free port)."""
    server, bound = create_server(servicer, f"{host}:{port}")
    server.start()
    return server, bound


def run_site(settings: SiteSettings, stop: threading.Event) -> None:
    """Serve until `stop` is set; announce the ports once listening."""
    if settings.link_device and settings.link is None:
        raise InvalidValueError("a link device needs a link profile (delay, rate or loss)")
    power = settings.power_source()
    worker = SiteWorker(
        settings.shard,
        power,
        device=settings.device,
        emulate_power=settings.gpu_index is None,
        stop=stop,
    )
    servicer = SiteServicer(settings.identity, worker)
    link = SiteLink(settings.link, settings.link_device) if settings.link else None
    try:
        _serve(settings, servicer, worker, link, stop)
    finally:
        if link is not None:
            link.stop()


def _serve(
    settings: SiteSettings,
    servicer: SiteServicer,
    worker: SiteWorker,
    link: SiteLink | None,
    stop: threading.Event,
) -> None:
    if link is None:
        server, port = _listen(servicer, settings.host, settings.port)
    else:
        server, port = link.serve(servicer, settings.host, settings.port)
    metrics = None
    try:
        if settings.metrics_port is not None:
            registry = CollectorRegistry()
            registry.register(SiteCollector(servicer))
            metrics = serve_metrics(registry, settings.host, settings.metrics_port)
        address = settings.advertise or f"{settings.host}:{port}"
        if settings.profiler:
            from powertrip.profiler.client import ProfilerClient

            client = ProfilerClient(settings.profiler)
            try:
                identity = settings.identity
                log.info(client.register(identity.site_id, address, identity.distance_km))
            finally:
                client.close()
        announce(
            service="site",
            site_id=settings.identity.site_id,
            port=port,
            metrics_port=metrics.port if metrics else None,
            samples=worker.num_samples,
        )
        stop.wait()
    finally:
        server.stop(grace=1).wait(5)
        if metrics is not None:
            metrics.stop()
