"""A profiler process: the poll loop, its gRPC server and /metrics."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from powertrip.metrics import serve_metrics
from powertrip.process import announce
from powertrip.profiler.profiler import Profiler, ProfilerSettings
from powertrip.profiler.server import ProfileCollector, ProfilerServicer, create_server
from powertrip.site.power import PowerSource


@dataclass(frozen=True)
class ProfilerProcessSettings:
    """Everything a profiler process is started with."""

    probing: ProfilerSettings = field(default_factory=ProfilerSettings)
    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int | None = None
    sites: Sequence[tuple[str, str, float]] = ()
    power_sources: Mapping[str, PowerSource] = field(default_factory=dict)


def run_profiler(settings: ProfilerProcessSettings, stop: threading.Event) -> None:
    """Serve until `stop` is set; announce the ports once listening."""
    profiler = Profiler(settings.probing, settings.power_sources)
    server, port = create_server(ProfilerServicer(profiler), f"{settings.host}:{settings.port}")
    server.start()
    profiler.start((s, a, d if d > 0 else math.nan) for s, a, d in settings.sites)
    metrics = None
    if settings.metrics_port is not None:
        registry = CollectorRegistry()
        registry.register(ProfileCollector(profiler))
        metrics = serve_metrics(registry, settings.host, settings.metrics_port)
    announce(service="profiler", port=port, metrics_port=metrics and metrics.port)
    stop.wait()
    profiler.stop()
    server.stop(grace=1).wait(5)
    if metrics is not None:
        metrics.stop()
