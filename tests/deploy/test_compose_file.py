"""The compose files as Compose v2 renders them (no engine needed): required variables,
site hardening and profiles, the GPU override, and Prometheus scraping every service."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from docker_engine import compose_binary

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose"
REQUIRED = {"POWERTRIP_API_TOKEN": "t0ken", "GRAFANA_ADMIN_PASSWORD": "pw"}
SITES = ["site-1", "site-2", "site-3", "site-4"]


def render(*files: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [
        compose_binary(),
        *(a for f in files for a in ("-f", f)),
        "config",
        "--format",
        "json",
    ]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTRIP_", "GRAFANA_"))}
    return subprocess.run(
        command,
        cwd=COMPOSE,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )


def config(*files: str) -> dict[str, Any]:
    done = render(*files, env=REQUIRED)
    assert done.returncode == 0, done.stderr
    rendered: dict[str, Any] = json.loads(done.stdout)
    return rendered


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_a_missing_required_variable_stops_with_its_name(missing: str) -> None:
    env = {k: v for k, v in REQUIRED.items() if k != missing}
    done = render("compose.yaml", env=env)
    assert done.returncode != 0
    assert f"required variable {missing} is missing a value" in done.stderr


def test_sites_shape_their_own_link_with_net_admin_only() -> None:
    services = config("compose.yaml")["services"]
    assert set(SITES) <= set(services)
    for name in SITES:
        site = services[name]
        assert site["cap_drop"] == ["ALL"]
        assert site["cap_add"] == ["NET_ADMIN"]
        command = site["command"]
        assert command[command.index("--link-device") + 1] == "eth0"
        assert command[command.index("--id") + 1] == name
        assert command[command.index("--advertise") + 1] == f"{name}:50051"
        assert site["depends_on"]["profiler"]["condition"] == "service_healthy"
        assert "deploy" not in site  # GPU reservations only in the override
    depends = services["aggregator"]["depends_on"]
    assert {name: depends[name]["condition"] for name in SITES} == dict.fromkeys(
        SITES, "service_healthy"
    )


def test_published_ports_bind_to_loopback_by_default() -> None:
    services = config("compose.yaml")["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", name


def test_the_gpu_override_reserves_a_gpu_for_every_site() -> None:
    services = config("compose.yaml", "compose.gpu.yaml")["services"]
    for index, name in enumerate(SITES):
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia"
        assert device["capabilities"] == ["gpu"]
        assert device["device_ids"] == [str(index)]
        assert services[name]["environment"]["POWERTRIP_SITE_DEVICE"] == "cuda:0"
        assert "--link-device" in services[name]["command"]  # the base command is kept


def test_prometheus_scrapes_every_service() -> None:
    scrape = yaml.safe_load((COMPOSE / "prometheus" / "prometheus.yml").read_text())
    targets = {
        target.split(":")[0]
        for job in scrape["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    assert targets == {"aggregator", "profiler", *SITES}
    services = config("compose.yaml")["services"]
    assert targets <= set(services)
