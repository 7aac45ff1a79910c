"""The three Dockerfiles: the base is an ARG, the build stages are the same (Docker has no
include, and the same stages are what lets the three images share their layers), every image
runs unprivileged and has a healthcheck."""

from __future__ import annotations

from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "services"
NAMES = ("aggregator", "profiler", "site")
FINAL_STAGE = "FROM ${BASE_IMAGE}\n"


def dockerfile(name: str) -> str:
    return (SERVICES / name / "Dockerfile").read_text()


def build_stages(text: str) -> str:
    """Everything from the first FROM to the final stage's FROM (comments name the service)."""
    start = text.index("ARG BASE_IMAGE")
    return text[start : text.index(FINAL_STAGE)]


def test_build_stages_are_the_same_in_all_three() -> None:
    stages = {name: build_stages(dockerfile(name)) for name in NAMES}
    assert len(set(stages.values())) == 1, "the build stages of the Dockerfiles differ"


@pytest.mark.parametrize("name", NAMES)
def test_base_is_an_argument_and_the_image_is_healthchecked(name: str) -> None:
    text = dockerfile(name)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0].startswith("ARG BASE_IMAGE=")
    assert all(
        line.startswith("FROM ${BASE_IMAGE}") or line == "FROM deps AS app"
        for line in lines
        if line.startswith("FROM")
    )
    final = text[text.index(FINAL_STAGE) :]
    assert "USER 10001:10001" in final
    assert "HEALTHCHECK" in final
    assert "powertrip.healthcheck" in final
    assert f'"powertrip", "{name}"' in final
