"""The report's summary table: static-optimal from the sweep, ratios to the references."""

from typing import Any

from powertrip.sim.report import markdown_table, summarize


def run(
    label: str, policy: dict[str, Any], seed: int, hours: float | None, k: int | None = None
) -> dict[str, Any]:
    """A finished run with just what the summary reads."""
    return {
        "label": label,
        "policy": policy,
        "seed": seed,
        "update_size_bytes": 1.5e9,
        "sweep_k": k,
        "time_to_accuracy_s": None if hours is None else hours * 3600,
        "rounds": 10,
        "final_accuracy": 0.8,
        "round_log": [{"selected": ["a"] * (k or 1)}],
    }


def test_static_optimal_and_ratios_whatever_the_labels() -> None:
    """Static-optimal is the sweep k with the best median; the centralized-25% reference is
    found by its settings, not its label."""
    runs = [
        run("mine", {"name": "powertrip"}, s, 1.0) for s in (0, 1)
    ] + [
        run("one site at a quarter", {"name": "centralized", "power_cap_ratio": 0.25}, s, 4.0)
        for s in (0, 1)
    ] + [
        run(f"sweep k={k}", {"name": "static-k", "k": k}, s, h, k)
        for k, h in ((10, 3.0), (20, 2.0), (30, None))
        for s in (0, 1)
    ]  # fmt: skip
    rows = {r.label: r for r in summarize({"runs": runs})}
    assert rows["static-optimal (k=20)"].median_hours == 2.0
    table = markdown_table(list(rows.values()), seeds=2)
    mine = next(line for line in table.splitlines() if line.startswith("| mine "))
    assert mine.endswith("| 0.50 | 0.25 |")  # 1 h vs static-optimal 2 h and centralized 4 h
