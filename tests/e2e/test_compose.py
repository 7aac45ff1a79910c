"""End to end: images built offline from Debian packages, `docker compose up`, a job submitted
over REST runs to success, Prometheus holds every site's series and answers every dashboard
query, each site's shaped link achieves its profile, and nothing of the test is left behind.

Everything it sends goes to 127.0.0.1 (published ports) or to its own containers.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import pytest

from apt import apt_install
from docker_engine import compose, docker_engine
from grafana_dashboards import panel_queries
from powertrip.aggregator.client import ApiClient
from powertrip.deploy.images import (
    SERVICES,
    build_service_image,
    build_wheelhouse,
    debian_image,
    prometheus_image,
)
from powertrip.local import free_port
from prometheus_server import query

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "deploy" / "compose"
SERVICES_UP = ["aggregator", "prometheus"]  # and, through depends_on, the profiler and sites
# Each site's profile in compose.yaml: one-way delay (ms) and rate (Mbit/s).
PROFILES = {"site-1": (0.5, 200), "site-2": (5, 100), "site-3": (12.5, 50), "site-4": (20, 25)}
TOLERANCE = 0.15


@dataclass(frozen=True)
class Stack:
    """The running compose project and where its published ports are."""

    project: str
    env: dict[str, str]
    api: str
    prometheus: str
    token: str = field(repr=False)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[docker.DockerClient]:
    with docker_engine(tmp_path_factory.mktemp("dockerd") / "dockerd.log") as client:
        yield client


@pytest.fixture(scope="module")
def images(engine: docker.DockerClient) -> Iterator[str]:
    """Base, Prometheus and service images tagged for this run; every image the builds made
    (tags and intermediate stages) is removed afterwards."""
    if shutil.which("mmdebstrap") is None:
        apt_install("mmdebstrap")
    tag = f"e2e-{secrets.token_hex(4)}"
    before = {str(image.id) for image in engine.images.list(all=True)}
    try:
        base = f"powertrip-e2e-base:{tag}"
        debian_image(engine, base)
        prometheus_image(engine, f"powertrip-e2e-prometheus:{tag}")
        build_wheelhouse(REPO)
        for service in SERVICES:
            build_service_image(engine, REPO, service, f"powertrip-e2e-{service}:{tag}", base)
        yield tag
    finally:
        remove_images_made_since(engine, before)


def remove_images_made_since(engine: docker.DockerClient, before: set[str]) -> None:
    """Remove every image not in `before`: tagged ones and intermediate build stages, children
    before parents (an image with children cannot go first)."""
    for _ in range(10):
        made = [str(image.id) for image in engine.images.list(all=True)]
        made = [image for image in made if image not in before]
        if not made:
            return
        for image in made:
            with contextlib.suppress(docker.errors.APIError):  # a parent: a later pass
                engine.images.remove(image, force=True)
    left = [str(image.id) for image in engine.images.list(all=True)]
    left = [image for image in left if image not in before]
    assert not left, f"images left behind: {left}"


@pytest.fixture(scope="module")
def stack(engine: docker.DockerClient, images: str) -> Iterator[Stack]:
    project = f"powertrip-e2e-{secrets.token_hex(3)}"
    token = secrets.token_urlsafe(24)
    api_port, prometheus_port = free_port(), free_port()
    env = {
        "POWERTRIP_IMAGE_PREFIX": "powertrip-e2e-",
        "POWERTRIP_TAG": images,
        "PROMETHEUS_IMAGE": f"powertrip-e2e-prometheus:{images}",
        "POWERTRIP_API_TOKEN": token,
        "GRAFANA_ADMIN_PASSWORD": secrets.token_urlsafe(12),  # Grafana is not started here
        "POWERTRIP_BIND": "127.0.0.1",
        "POWERTRIP_API_PORT": str(api_port),
        "PROMETHEUS_PORT": str(prometheus_port),
        "PROFILER_PORT": str(free_port()),
    }
    try:
        compose(COMPOSE, project, env, "up", "--detach", "--no-build", "--wait",
                "--wait-timeout", "300", *SERVICES_UP)  # fmt: skip
        yield Stack(
            project,
            env,
            f"http://127.0.0.1:{api_port}",
            f"http://127.0.0.1:{prometheus_port}",
            token,
        )
    finally:
        logs = compose(COMPOSE, project, env, "logs", "--no-color", "--tail", "40").stdout
        compose(COMPOSE, project, env, "down", "--volumes", "--remove-orphans", "--timeout", "20")
        label: dict[str, str | list[str] | bool] = {
            "label": f"com.docker.compose.project={project}"
        }
        left = engine.containers.list(all=True, filters=label)
        networks = engine.networks.list(filters=label)
        volumes = engine.volumes.list(filters=label)
        assert not left, f"containers left behind: {left}"
        assert not networks, f"networks left behind: {networks}"
        assert not volumes, f"volumes left behind: {volumes}"
        print(logs)


def site_ids(result: list[dict[str, Any]]) -> set[str]:
    return {str(sample["metric"].get("site_id")) for sample in result}


def test_compose_runs_a_job_and_every_view_has_data(
    engine: docker.DockerClient, stack: Stack
) -> None:
    with ApiClient(stack.api, stack.token, timeout_s=30) as client:
        sites = {site["site_id"] for site in client.sites()}
        assert sites == set(PROFILES)
        job = client.submit(
            {"task": "mnist", "model": "mlp", "target_accuracy": 0.7, "max_rounds": 60}
        )
        deadline = time.monotonic() + 420
        while (state := client.job(job["id"]))["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"job still {state['state']}"
            time.sleep(2)
        assert state["state"] == "succeeded", state
        rounds = list(client.rounds_after(job["id"]))
    job_id = job["id"]
    finished = datetime.fromisoformat(state["finished_at"]).timestamp()
    print(f"job {job_id}: {len(rounds)} rounds, {state['reason']}")

    # Evaluate after two more scrapes (5 s apart), so every rate window holds the last rounds.
    at = finished + 12
    time.sleep(max(0.0, at - time.time() + 1))
    histogram = f'powertrip_round_duration_seconds_count{{training_job="{job_id}"}}'
    count = query(stack.prometheus, histogram, at)
    assert count, "no round-time histogram"
    assert float(count[0]["value"][1]) == len(rounds)
    for metric in (
        "powertrip_site_power_watts",
        "powertrip_site_power_available_ratio",
        "powertrip_site_compute_seconds_total",
        "powertrip_site_rtt_seconds",
        "powertrip_site_bandwidth_bytes_per_second",
    ):
        assert site_ids(query(stack.prometheus, metric, at)) == set(PROFILES), metric

    empty = []
    for panel in panel_queries():
        if not query(stack.prometheus, panel.promql, at):
            empty.append(f"{panel.dashboard} / {panel.panel} / {panel.ref_id}: {panel.promql}")
    assert not empty, "dashboard queries without data:\n" + "\n".join(empty)


def test_each_site_link_achieves_its_profile(engine: docker.DockerClient, stack: Stack) -> None:
    """`powertrip link check` against each site from the (idle) aggregator's container, with
    the profiler stopped so that its own probes do not share the links being measured."""
    compose(COMPOSE, stack.project, stack.env, "stop", "profiler")
    label = f"com.docker.compose.project={stack.project}"
    (checker,) = engine.containers.list(
        filters={"label": [label, "com.docker.compose.service=aggregator"]}
    )
    report = []
    for site, (delay_ms, rate_mbit) in PROFILES.items():
        command = ["powertrip", "link", "check", f"{site}:50051", "--delay-ms", str(delay_ms),
                   "--rate-mbit", str(rate_mbit), "--probe-size", "8MiB",
                   "--tolerance", str(TOLERANCE)]  # fmt: skip
        code, output = checker.exec_run(command)
        assert isinstance(output, bytes)
        text = output.decode()
        figures = re.search(r"rtt_ms=([\d.]+) bandwidth_mbit=([\d.]+)", text)
        assert figures, text
        rtt_ms, achieved = map(float, figures.groups())
        report.append(
            f"{site}: rtt {rtt_ms:.1f} ms (configured {2 * delay_ms:g}), "
            f"{achieved:.1f} of {rate_mbit} Mbit/s"
        )
        assert code == 0, text
        assert achieved == pytest.approx(rate_mbit, rel=TOLERANCE)
    print("\n".join(report))
