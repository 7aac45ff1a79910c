"""Debian's real Prometheus scrapes the services of a local deployment during a job."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from powertrip.local import LocalDeployment
from prometheus_server import query, start_prometheus

pytestmark = pytest.mark.integration


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[LocalDeployment]:
    """Profiler and two sites."""
    with LocalDeployment(2, tmp_path / "run", profile_period_s=0.5) as running:
        yield running


def test_round_time_and_site_power_series_reach_prometheus(
    tmp_path: Path, deployment: LocalDeployment
) -> None:
    """After a short job Prometheus holds the aggregator's round-time histogram and the power
    of every site, from the sites and from the profiler."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"job_id": "prom", "target_accuracy": 0.6, "max_rounds": 20}))
    targets = tmp_path / "targets.json"
    prometheus, base = start_prometheus(tmp_path, targets)
    try:
        aggregator = deployment.aggregator(job, linger_s=30)
        targets.write_text(json.dumps([{"targets": deployment.scrape_targets()}]))
        while aggregator.next_event(timeout_s=120)["event"] not in ("done", "exit"):
            pass
        site_ids = {s.site_id for s in deployment.sites}
        deadline = time.monotonic() + 60
        while True:
            try:
                rounds = query(base, 'powertrip_round_duration_seconds_count{training_job="prom"}')
                power = query(base, "powertrip_site_power_watts")
                available = query(base, "powertrip_site_power_available_ratio")
                rtt = query(base, "powertrip_site_rtt_seconds")
            except httpx.HTTPError:
                rounds = power = available = rtt = []
            seen = {str(s["metric"]["site_id"]) for s in power}
            # Both sources scraped: each site itself and the profiler's view of it.
            both = seen == site_ids and len(power) == 2 * len(site_ids)
            if rounds and float(rounds[0]["value"][1]) > 0 and both and rtt:
                break
            assert time.monotonic() < deadline, f"series missing: rounds={rounds} power={power}"
            time.sleep(1)
        assert {str(s["metric"]["site_id"]) for s in available} == site_ids
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=10)
