"""The Grafana dashboards are valid and every panel's PromQL is accepted by a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from pathlib import Path

import httpx
import pytest

from grafana_dashboards import (
    load_dashboards,
    panel_queries,
    provisioned_datasource_uids,
    substitute,
)
from prometheus_server import query, start_prometheus, wait_ready

GRID_COLUMNS = 24
EXPECTED_PANELS = {
    "sites.json": {"Power available", "Power drawn", "Bandwidth", "Round-trip time"},
    "training.json": {"accuracy", "compute vs communication", "selected", "Round time"},
}


def test_dashboard_and_panel_ids_are_unique() -> None:
    dashboards = load_dashboards()
    assert set(dashboards) == set(EXPECTED_PANELS)
    uids = [d["uid"] for d in dashboards.values()]
    titles = [d["title"] for d in dashboards.values()]
    assert len(set(uids)) == len(uids)
    assert len(set(titles)) == len(titles)
    for dashboard in dashboards.values():
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(set(ids)) == len(ids), dashboard["uid"]
        for panel in dashboard["panels"]:
            refs = [target["refId"] for target in panel["targets"]]
            assert refs, panel["title"]
            assert len(set(refs)) == len(refs), panel["title"]


def test_every_panel_uses_the_provisioned_datasource() -> None:
    provisioned = provisioned_datasource_uids()
    assert provisioned == {"powertrip-prometheus"}
    for dashboard in load_dashboards().values():
        things = [*dashboard["panels"], *dashboard["templating"]["list"]]
        things += [t for panel in dashboard["panels"] for t in panel["targets"]]
        for thing in things:
            assert thing["datasource"] == {"type": "prometheus", "uid": "powertrip-prometheus"}


def test_panels_fit_the_grid_without_overlapping() -> None:
    for dashboard in load_dashboards().values():
        boxes = []
        for panel in dashboard["panels"]:
            grid = panel["gridPos"]
            assert grid["w"] > 0, panel["title"]
            assert grid["h"] > 0, panel["title"]
            assert grid["x"] >= 0, panel["title"]
            assert grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
            boxes.append((panel["title"], grid))
        for (a, p), (b, q) in combinations(boxes, 2):
            apart = (
                p["x"] + p["w"] <= q["x"]
                or q["x"] + q["w"] <= p["x"]
                or p["y"] + p["h"] <= q["y"]
                or q["y"] + q["h"] <= p["y"]
            )
            assert apart, f"{a!r} overlaps {b!r}"


def test_the_required_views_are_there() -> None:
    for name, dashboard in load_dashboards().items():
        titles = " | ".join(panel["title"] for panel in dashboard["panels"])
        for words in EXPECTED_PANELS[name]:
            assert words in titles, f"{name} lacks a panel about {words!r}"


def test_variables_are_defined_and_substituted() -> None:
    assert substitute('rate(x{a=~"$site"}[$__rate_interval])', {"site": ".*"}) == (
        'rate(x{a=~".*"}[1m])'
    )
    with pytest.raises(KeyError, match=r"undefined variable \$nope"):
        substitute('x{a=~"$nope"}', {})
    queries = panel_queries()
    assert len(queries) >= 14
    for panel in queries:
        assert "$" not in panel.promql, panel


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("prometheus")
    targets = folder / "targets.json"
    targets.write_text("[]")
    process, base = start_prometheus(folder, targets)
    try:
        wait_ready(base)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_every_panel_query_is_accepted_by_prometheus(prometheus: str) -> None:
    for panel in panel_queries():
        query(prometheus, panel.promql)  # asserts Prometheus answered "success"


def test_prometheus_refuses_broken_promql(prometheus: str) -> None:
    """The check above can fail: a malformed query is refused."""
    reply = httpx.get(f"{prometheus}/api/v1/query", params={"query": "sum by (x (y)"}, timeout=5)
    assert reply.json()["status"] == "error"


def test_provisioning_points_at_the_dashboards_folder() -> None:
    provider = Path(__file__).resolve().parents[2] / "deploy/compose/grafana/provisioning"
    text = (provider / "dashboards" / "powertrip.yaml").read_text()
    assert "path: /var/lib/grafana/dashboards" in text
    compose = (provider.parents[1] / "compose.yaml").read_text()
    assert "./grafana/dashboards:/var/lib/grafana/dashboards:ro" in compose
