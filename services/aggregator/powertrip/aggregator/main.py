"""An aggregator process, in one of two modes:
- `serve_api`: the REST job API over a durable store; jobs queue, run N at a time, and
  resume after a restart (the default of `powertrip aggregator`);
- `run_aggregator`: one job from a job file, every round a JSON line on stdout (`--job`).
Both register the sites of a sites file with the profiler and serve /metrics."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from powertrip.aggregator.job import JobFile, run_job
from powertrip.aggregator.metrics import AggregatorMetrics
from powertrip.errors import PowerTripError
from powertrip.metrics import serve_metrics
from powertrip.process import announce, return_large_buffers_to_the_os
from powertrip.profiler.client import ProfilerClient
from powertrip.rounds import JobState


@dataclass(frozen=True)
class AggregatorSettings:
    """Everything an aggregator process is started with."""

    profiler: str
    job: JobFile
    sites_file: Path | None = None
    host: str = "127.0.0.1"
    metrics_port: int | None = None
    linger_s: float = 0.0


def round_line(state: JobState) -> str:
    """The last round of `state` as one JSON line."""
    record = state.records[-1]
    return json.dumps(
        {
            "event": "round",
            "round": record.round_index,
            "candidates": record.candidate_count,
            "selected": list(record.selected_site_ids),
            "completed": list(record.completed_site_ids),
            "dropped": [list(d) for d in record.dropped],
            "accuracy": record.accuracy,
            "round_time_s": record.round_time_s,
            "compute_s": record.compute_time_s,
            "communication_s": record.communication_time_s,
            "elapsed_s": record.end_time_s - state.start_time_s,
        }
    )


def register_sites_file(client: ProfilerClient, path: Path) -> int:
    """Register every site of `path` that names an address; how many."""
    from powertrip.sites_file import load_sites_with_addresses

    table, addresses = load_sites_with_addresses(path)
    for index, site_id in enumerate(table.site_ids):
        if site_id in addresses:
            client.register(site_id, addresses[site_id], float(table.distance_km[index]))
    return len(addresses)


def run_aggregator(settings: AggregatorSettings, stop: threading.Event) -> bool:
    """Run the job; whether it reached its target accuracy."""
    return_large_buffers_to_the_os()  # keeps concurrent update streams at O(model) memory
    metrics = AggregatorMetrics(CollectorRegistry())
    server = None
    if settings.metrics_port is not None:
        server = serve_metrics(metrics.registry, settings.host, settings.metrics_port)
    client = ProfilerClient(settings.profiler)
    try:
        registered = 0
        if settings.sites_file is not None:
            registered = register_sites_file(client, settings.sites_file)
        announce(
            service="aggregator",
            metrics_port=server.port if server else None,
            registered=registered,
            job=settings.job.job_id,
        )

        def report(state: JobState) -> None:
            sys.stdout.write(round_line(state) + "\n")
            sys.stdout.flush()

        job = settings.job
        state = run_job(
            job.job_id, job, client, stop, data_dir=job.data_dir, on_round=report, metrics=metrics
        )
        tta = state.time_to_accuracy_s(settings.job.target_accuracy)
        sys.stdout.write(
            json.dumps(
                {
                    "event": "done",
                    "rounds": len(state.records),
                    "accuracy": state.accuracy,
                    "target_accuracy": settings.job.target_accuracy,
                    "reached": tta is not None,
                    "time_to_accuracy_s": tta,
                    "cancelled": stop.is_set(),
                }
            )
            + "\n"
        )
        sys.stdout.flush()
        stop.wait(settings.linger_s)  # lets Prometheus take a last scrape
        return tta is not None
    finally:
        client.close()
        if server is not None:
            server.stop()


@dataclass(frozen=True)
class ApiServerSettings:
    """An aggregator serving the job API (`powertrip aggregator` without --job)."""

    profiler: str
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    auth_reads: bool = False
    max_concurrent_jobs: int = 1
    checkpoint_every: int = 1
    datasets_dir: Path | None = None
    sites_file: Path | None = None
    log_level: str = "info"

    def __repr__(self) -> str:  # keeps the token out of logs and tracebacks
        return f"ApiServerSettings(profiler={self.profiler!r}, data_dir={self.data_dir!r}, ...)"


TOKEN_FILE = "api-token"


def api_token(settings: ApiServerSettings) -> tuple[str, Path | None]:
    """The token the API checks: the one given, else the data folder's `api-token` (made,
    readable by this user only, on first start); and the file it is in, if any."""
    if settings.token:
        return settings.token, None
    path = settings.data_dir / TOKEN_FILE
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(32) + "\n")
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise PowerTripError(f"{path} is empty: delete it to make a new token")
    return token, path


def serve_api(settings: ApiServerSettings) -> None:
    """Serve the job API until SIGINT/SIGTERM; running jobs go back to the queue on the way
    out and resume when an aggregator starts on the same data folder."""
    import uvicorn

    from powertrip.aggregator.api import ApiServices, ApiSettings, create_app, profiler_sites
    from powertrip.aggregator.metrics import JobsCollector
    from powertrip.aggregator.runner import JobRunner, ProfiledExecution
    from powertrip.aggregator.store import SqliteJobStore

    return_large_buffers_to_the_os()
    store = SqliteJobStore(settings.data_dir)
    client = ProfilerClient(settings.profiler)
    try:
        token, token_file = api_token(settings)
        registered = register_sites_file(client, settings.sites_file) if settings.sites_file else 0
        metrics = AggregatorMetrics(CollectorRegistry())
        metrics.registry.register(JobsCollector(store.counts))
        runner = JobRunner(
            store,
            ProfiledExecution(client, settings.datasets_dir, metrics),
            settings.max_concurrent_jobs,
            settings.checkpoint_every,
        )
        listener = socket.create_server((settings.host, settings.port))
        port = listener.getsockname()[1]

        def ready() -> None:
            announce(
                service="aggregator",
                api_url=f"http://{settings.host}:{port}",
                port=port,
                data_dir=str(settings.data_dir),
                token_file=str(token_file) if token_file else None,
                registered=registered,
            )

        app = create_app(
            ApiSettings(token, settings.auth_reads),
            ApiServices(store, runner, profiler_sites(client)),
            metrics.registry,
            on_ready=ready,
        )
        config = uvicorn.Config(app, log_level=settings.log_level, lifespan="on")
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        client.close()
        store.close()
