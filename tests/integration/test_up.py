"""`powertrip up` as a user runs it: it starts every service and Ctrl-C stops them all."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration


def test_up_serves_every_service_and_ctrl_c_stops_them_all(tmp_path: Path) -> None:
    """Every /metrics endpoint answers while `up` runs; after SIGINT none does and `up` ends."""
    targets = tmp_path / "targets.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "powertrip", "up", "--sites", "2", "--run-dir", str(tmp_path),
         "--prometheus-targets", str(targets)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not targets.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "up did not start in time"
            time.sleep(0.2)
        endpoints = json.loads(targets.read_text())[0]["targets"]
        assert len(endpoints) == 3  # profiler and two sites
        for endpoint in endpoints:
            assert "powertrip_site_" in httpx.get(f"http://{endpoint}/metrics", timeout=5).text
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "site" in out
    for endpoint in endpoints:
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://{endpoint}/metrics", timeout=2)
