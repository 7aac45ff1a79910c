"""Summaries of `results.json`: the time-to-accuracy table of `report.md`, with the
static-optimal baseline derived from the static-k sweep.

Static-optimal is the k whose median time-to-accuracy over seeds is lowest (a run that never
reaches the target counts as infinitely slow); its per-seed results are the sweep runs at that
k. Medians and ranges are over seeds; a policy that missed the target in some seed shows how
many seeds it reached it in, and its median is infinite if it missed in half or more.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from powertrip.model.units import format_size_bytes

STATIC_OPTIMAL = "static-optimal"


@dataclass(frozen=True)
class PolicySummary:
    """One row of the report: a policy at one update size, over seeds."""

    label: str
    policy: dict[str, Any]
    update_size_bytes: float
    tta_hours: list[float]
    rounds: list[int]
    final_accuracy: list[float]
    mean_sites: list[float]

    @property
    def median_hours(self) -> float:
        """Median time-to-accuracy in hours (inf if half the seeds missed the target)."""
        return float(np.median(self.tta_hours))

    @property
    def reached(self) -> int:
        """Seeds in which the target was reached."""
        return sum(math.isfinite(h) for h in self.tta_hours)


def _hours(run: dict[str, Any]) -> float:
    tta = run["time_to_accuracy_s"]
    return math.inf if tta is None else tta / 3600.0


def _summary(label: str, size: float, runs: list[dict[str, Any]]) -> PolicySummary:
    runs = sorted(runs, key=lambda r: r["seed"])
    return PolicySummary(
        label=label,
        policy=runs[0]["policy"],
        update_size_bytes=size,
        tta_hours=[_hours(r) for r in runs],
        rounds=[r["rounds"] for r in runs],
        final_accuracy=[r["final_accuracy"] for r in runs],
        mean_sites=[
            float(np.mean([len(x["selected"]) for x in r["round_log"]])) if r["round_log"] else 0.0
            for r in runs
        ],
    )


def sweep_curve(runs: list[dict[str, Any]], size: float) -> dict[int, list[float]]:
    """TTA hours per seed for every k of the static-k sweep at one update size."""
    curve: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        if run["sweep_k"] is not None and run["update_size_bytes"] == size:
            curve[run["sweep_k"]].append(_hours(run))
    return dict(sorted(curve.items()))


def best_static_k(runs: list[dict[str, Any]], size: float) -> int | None:
    """The k of the sweep with the lowest median TTA (ties: smaller k); None without a sweep."""
    curve = sweep_curve(runs, size)
    if not curve:
        return None
    return min(curve, key=lambda k: (float(np.median(curve[k])), k))


def summarize(results: dict[str, Any]) -> list[PolicySummary]:
    """Rows for every policy and the static-optimal baseline, per update size."""
    runs = results["runs"]
    rows: list[PolicySummary] = []
    for size in sorted({r["update_size_bytes"] for r in runs}):
        at_size = [r for r in runs if r["update_size_bytes"] == size]
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for run in at_size:
            if run["sweep_k"] is None:
                grouped[run["label"]].append(run)
        rows.extend(_summary(label, size, group) for label, group in grouped.items())
        best = best_static_k(at_size, size)
        if best is not None:
            optimal = [r for r in at_size if r["sweep_k"] == best]
            rows.append(_summary(f"{STATIC_OPTIMAL} (k={best})", size, optimal))
    return rows


def _find(
    rows: list[PolicySummary], size: float, matches: Callable[[PolicySummary], bool]
) -> PolicySummary | None:
    return next((r for r in rows if r.update_size_bytes == size and matches(r)), None)


def _is_static_optimal(row: PolicySummary) -> bool:
    return row.label.startswith(STATIC_OPTIMAL)


def _is_centralized_25(row: PolicySummary) -> bool:
    """The centralized baseline at 25% power, whatever its label."""
    policy = row.policy
    return (
        policy.get("name") == "centralized" and float(policy.get("power_cap_ratio", 0.25)) == 0.25
    )


def _ratio(value: float, reference: PolicySummary | None) -> str:
    if reference is None or not math.isfinite(reference.median_hours) or not math.isfinite(value):
        return "-"
    return f"{value / reference.median_hours:.2f}"


def _hours_text(hours: float) -> str:
    return f"{hours:.2f}" if math.isfinite(hours) else "not reached"


def markdown_table(rows: list[PolicySummary], seeds: int) -> str:
    """The TTA table: median and range over seeds, ratios to static-optimal and centralized."""
    lines = []
    for size in sorted({r.update_size_bytes for r in rows}):
        at_size = sorted(
            (r for r in rows if r.update_size_bytes == size), key=lambda r: r.median_hours
        )
        optimal = _find(rows, size, _is_static_optimal)
        central = _find(rows, size, _is_centralized_25)
        lines += [
            f"### Update size {format_size_bytes(size)}",
            "",
            "| policy | median TTA (h) | range over seeds (h) | reached | median rounds "
            "| mean sites/round | vs static-optimal | vs centralized-25% |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in at_size:
            finite = [h for h in row.tta_hours if math.isfinite(h)]
            spread = f"{min(finite):.2f} - {max(finite):.2f}" if finite else "-"
            lines.append(
                f"| {row.label} | {_hours_text(row.median_hours)} | {spread} | "
                f"{row.reached}/{len(row.tta_hours)} | {np.median(row.rounds):.0f} | "
                f"{np.mean(row.mean_sites):.1f} | {_ratio(row.median_hours, optimal)} | "
                f"{_ratio(row.median_hours, central)} |"
            )
        lines.append("")
    lines.append(f"Medians over {seeds} seeds; TTA = simulated time to the target accuracy.")
    return "\n".join(lines)


def write_report(results: dict[str, Any], folder: Path) -> Path:
    """Write `report.md` and the plots next to `results.json`; returns the report's path."""
    from powertrip.sim.plots import plot_all  # matplotlib only when a report is written

    rows = summarize(results)
    experiment = results["experiment"]
    plots = plot_all(results, rows, folder) if results["runs"] else []
    seeds = len({r["seed"] for r in results["runs"]})
    task, power, sites, timing = (
        experiment["task"],
        experiment["power"],
        experiment["sites"],
        experiment["timing"],
    )
    partition = (
        f"Dirichlet non-IID (alpha = {task['dirichlet_alpha']})"
        if task["partition"] == "dirichlet"
        else task["partition"]
    )
    power_text = {
        "uniform": f"uniform U({power['min_ratio']}, {power['max_ratio']}) per site, fixed",
        "constant": f"constant {power['ratio']}",
        "trace": f"power-domain traces ({power['trace_source']}), a(t) = 1 - utilisation",
    }[power["mode"]]
    lines = [
        f"# {experiment['name']}",
        "",
        experiment["description"],
        "",
        f"- sites: {sites['count']}, distances {sites['distance']['law']} "
        f"{sites['distance']['min_miles']:g}..{sites['distance']['max_miles']:g} miles, "
        f"bandwidth {sites['bandwidth_max_bytes_per_s'] / 1.25e8:g} Gbit/s up to "
        f"{sites['bandwidth_knee_miles']:g} miles, then ~ 1/distance",
        f"- power: {power_text}",
        f"- task: {task['name']} with the {task['model']} model, {partition}; "
        f"{task['local_steps']} local SGD steps of batch {task['batch_size']} per round, "
        f"learning rate {task['learning_rate']}",
        f"- time: T_0 = {timing['base_compute_time_s']:g} s per round at full power, "
        f"stretched by 1/a; Eq.3 communication per site; round = slowest site (Eq.7)",
        f"- target accuracy {experiment['target_accuracy']}, at most "
        f"{experiment['max_rounds']} rounds, {seeds} seed(s), {len(results['runs'])} runs",
        "",
        "## Time to accuracy",
        "",
        markdown_table(rows, seeds) if rows else "No finished runs.",
        "",
    ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    report = folder / "report.md"
    report.write_text("\n".join(lines))
    return report
