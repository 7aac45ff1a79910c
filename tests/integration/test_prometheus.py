"""Debian's real Prometheus scrapes the services of a local deployment during a job."""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from powertrip.local import LocalDeployment, free_port

pytestmark = pytest.mark.integration


def prometheus_binary() -> str:
    """Debian's `prometheus`, installed with apt-get when missing (CI runs as root)."""
    found = shutil.which("prometheus")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip("prometheus is not installed and installing it needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=300)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"],
        check=True,
        env=env,
        timeout=600,
    )
    found = shutil.which("prometheus")
    assert found, "apt-get installed prometheus but it is not on PATH"
    return found


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[LocalDeployment]:
    """Profiler and two sites."""
    with LocalDeployment(2, tmp_path / "run", profile_period_s=0.5) as running:
        yield running


def start_prometheus(tmp_path: Path, targets_file: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus scraping every second the targets listed in `targets_file`."""
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "powertrip",
                        "file_sd_configs": [
                            {"files": [str(targets_file)], "refresh_interval": "1s"}
                        ],
                    }
                ],
            }
        )
    )
    address = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [
            prometheus_binary(),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={address}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    return process, f"http://{address}"


def query(base: str, promql: str) -> list[dict[str, object]]:
    """The instant-query result of `promql`."""
    reply = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert reply["status"] == "success", reply
    result: list[dict[str, object]] = reply["data"]["result"]
    return result


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
            seen = {str(s["metric"]["site_id"]) for s in power}  # type: ignore[index]
            # Both sources scraped: each site itself and the profiler's view of it.
            both = seen == site_ids and len(power) == 2 * len(site_ids)
            if rounds and float(rounds[0]["value"][1]) > 0 and both and rtt:  # type: ignore[index]
                break
            assert time.monotonic() < deadline, f"series missing: rounds={rounds} power={power}"
            time.sleep(1)
        assert {str(s["metric"]["site_id"]) for s in available} == site_ids  # type: ignore[index]
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=10)
