"""The aggregator's Prometheus metrics (DESIGN §7), one set per process registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from powertrip.metrics import TRANSFER_BYTES
from powertrip.rounds import RoundRecord

if TYPE_CHECKING:
    from powertrip.aggregator.store import JobPhase

ROUND_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class AggregatorMetrics:
    """Round time and its split, rounds, selected sites, accuracy and bytes moved."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        job = ["training_job"]
        self.round_duration = Histogram(
            "powertrip_round_duration_seconds",
            "Wall time of a round, selection to aggregation.",
            job,
            buckets=ROUND_BUCKETS_S,
            registry=self.registry,
        )
        self.round_compute = Gauge(
            "powertrip_round_compute_seconds",
            "Slowest completed site's compute time in the last round.",
            job,
            registry=self.registry,
        )
        self.round_communication = Gauge(
            "powertrip_round_communication_seconds",
            "Slowest completed site's communication time in the last round.",
            job,
            registry=self.registry,
        )
        self.rounds = Counter("powertrip_rounds", "Rounds finished.", job, registry=self.registry)
        self.selected_sites = Gauge(
            "powertrip_selected_sites",
            "Sites selected in the last round.",
            job,
            registry=self.registry,
        )
        self.accuracy = Gauge(
            "powertrip_global_accuracy_ratio",
            "Held-out accuracy of the global model.",
            job,
            registry=self.registry,
        )
        self.transfer = Counter(
            TRANSFER_BYTES,
            "Model bytes sent to sites and update bytes received from them.",
            ["training_job", "direction"],
            registry=self.registry,
        )

    def observe(self, job_id: str, record: RoundRecord, payload_bytes: int) -> None:
        """Record one finished round."""
        self.round_duration.labels(job_id).observe(record.round_time_s)
        self.round_compute.labels(job_id).set(record.compute_time_s)
        self.round_communication.labels(job_id).set(record.communication_time_s)
        self.rounds.labels(job_id).inc()
        self.selected_sites.labels(job_id).set(len(record.selected_site_ids))
        self.accuracy.labels(job_id).set(record.accuracy)
        self.transfer.labels(job_id, "sent").inc(payload_bytes * len(record.selected_site_ids))
        self.transfer.labels(job_id, "received").inc(payload_bytes * len(record.completed_site_ids))


class JobsCollector(Collector):
    """`powertrip_jobs{state}`: jobs in each state, read from the store at every scrape."""

    def __init__(self, counts: Callable[[], Mapping[JobPhase, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        """One gauge sample per job state."""
        gauge = GaugeMetricFamily("powertrip_jobs", "Jobs by state.", labels=["state"])
        for state, count in self.counts().items():
            gauge.add_metric([str(state)], count)
        yield gauge
