"""A site process: its worker, gRPC server, /metrics, and registration with the profiler."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from powertrip.errors import InvalidValueError
from powertrip.metrics import serve_metrics
from powertrip.process import announce
from powertrip.site.power import (
    ConstantPowerSource,
    NvmlPowerSource,
    PowerSource,
    TraceReplayPowerSource,
)
from powertrip.site.server import SiteCollector, SiteIdentity, SiteServicer, create_server
from powertrip.site.worker import ShardSpec, SiteWorker

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


def run_site(settings: SiteSettings, stop: threading.Event) -> None:
    """Serve until `stop` is set; announce the ports once listening."""
    power = settings.power_source()
    worker = SiteWorker(
        settings.shard,
        power,
        device=settings.device,
        emulate_power=settings.gpu_index is None,
        stop=stop,
    )
    servicer = SiteServicer(settings.identity, worker)
    server, port = create_server(servicer, f"{settings.host}:{settings.port}")
    server.start()
    metrics_port = None
    metrics = None
    if settings.metrics_port is not None:
        registry = CollectorRegistry()
        registry.register(SiteCollector(servicer))
        metrics = serve_metrics(registry, settings.host, settings.metrics_port)
        metrics_port = metrics.port
    address = settings.advertise or f"{settings.host}:{port}"
    if settings.profiler:
        from powertrip.profiler.client import ProfilerClient

        client = ProfilerClient(settings.profiler)
        try:
            log.info(
                client.register(settings.identity.site_id, address, settings.identity.distance_km)
            )
        finally:
            client.close()
    announce(
        service="site",
        site_id=settings.identity.site_id,
        port=port,
        metrics_port=metrics_port,
        samples=worker.num_samples,
    )
    stop.wait()
    server.stop(grace=1).wait(5)
    if metrics is not None:
        metrics.stop()
