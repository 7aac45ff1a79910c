"""A real Prometheus for tests: Debian's package, installed when missing, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from powertrip.local import free_port


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
