"""A real Prometheus for tests: Debian's package, installed when missing, on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from apt import apt_install
from powertrip.local import free_port


def prometheus_binary() -> str:
    """Debian's `prometheus`, installed when missing."""
    if shutil.which("prometheus") is None:
        apt_install("prometheus")
    found = shutil.which("prometheus")
    assert found, "apt-get installed prometheus but it is not on PATH"
    return found


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


def wait_ready(base: str, timeout_s: float = 60) -> None:
    """Wait until Prometheus at `base` says it is ready."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/-/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"Prometheus at {base} not ready in {timeout_s:g} s"
        time.sleep(0.3)


def query(base: str, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    """The instant-query result of `promql` (now, or at Unix time `at`)."""
    params: dict[str, Any] = {"query": promql}
    if at is not None:
        params["time"] = at
    reply = httpx.get(f"{base}/api/v1/query", params=params, timeout=10).json()
    assert reply["status"] == "success", f"{promql}: {reply}"
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result
