"""The provisioned Grafana dashboards (deploy/compose/grafana), read as JSON, and their PromQL
made runnable against Prometheus directly (Grafana cannot run here: DESIGN §6)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

GRAFANA = Path(__file__).resolve().parents[1] / "deploy" / "compose" / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
DATASOURCES = GRAFANA / "provisioning" / "datasources"
# What Grafana puts for its built-in variables (the rate window: 4 scrapes of 5 s, at least 1m).
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    """One target of one panel, with its dashboard's variables substituted."""

    dashboard: str
    panel: str
    ref_id: str
    expr: str
    promql: str


def load_dashboards() -> dict[str, dict[str, Any]]:
    """Every dashboard file by name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def provisioned_datasource_uids() -> set[str]:
    """uids of the datasources Grafana is provisioned with."""
    uids = set()
    for path in DATASOURCES.glob("*.yaml"):
        for source in yaml.safe_load(path.read_text())["datasources"]:
            uids.add(source["uid"])
    return uids


def substitute(expr: str, variables: dict[str, str]) -> str:
    """`expr` with Grafana's variables replaced as "All" (or the built-in's value) would be."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in BUILTINS:
            return BUILTINS[name]
        if name not in variables:
            raise KeyError(f"undefined variable ${name} in {expr!r}")
        return variables[name]

    return VARIABLE.sub(value, expr)


def panel_queries() -> list[PanelQuery]:
    """Every target of every panel of every dashboard."""
    queries = []
    for name, dashboard in load_dashboards().items():
        variables = {v["name"]: v.get("allValue") or ".*" for v in dashboard["templating"]["list"]}
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                queries.append(
                    PanelQuery(
                        name,
                        panel["title"],
                        target["refId"],
                        target["expr"],
                        substitute(target["expr"], variables),
                    )
                )
    return queries
