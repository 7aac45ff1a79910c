"""An aggregator process: registers the sites of its sites file with the profiler, runs a job,
reports every round as a JSON line on stdout, and serves /metrics throughout."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from powertrip.aggregator.job import JobFile, run_job
from powertrip.aggregator.metrics import AggregatorMetrics
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
