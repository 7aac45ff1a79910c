"""PNG plots of an experiment's results (matplotlib, no display needed).

- `tta_per_policy.png`: median time-to-accuracy per policy, bars span the seeds (paper Fig. 9);
- `tta_vs_k.png`: the static-k sweep, median and range over seeds, best k marked (Fig. 8);
- `sites_over_time.png`: sites per round against time, PowerTrip vs static-optimal (Fig. 10);
- `accuracy_vs_time.png`: global accuracy against simulated time, one line per policy.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from powertrip.model.units import format_size_bytes
from powertrip.sim.report import PolicySummary, best_static_k, sweep_curve


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_all(results: dict[str, Any], rows: list[PolicySummary], out_dir: Path) -> list[Path]:
    """Write every plot that the results support; returns the files written."""
    plt = _pyplot()
    written = [_tta_per_policy(plt, rows, out_dir / "tta_per_policy.png")]
    runs = results["runs"]
    sizes = sorted({r["update_size_bytes"] for r in runs})
    if any(r["sweep_k"] is not None for r in runs):
        written.append(_tta_vs_k(plt, runs, sizes, out_dir / "tta_vs_k.png"))
    written.append(_sites_over_time(plt, runs, sizes[0], out_dir / "sites_over_time.png"))
    target = float(results["experiment"]["target_accuracy"])
    written.append(_accuracy_vs_time(plt, runs, sizes[0], target, out_dir / "accuracy_vs_time.png"))
    return written


def _save(plt: Any, figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _tta_per_policy(plt: Any, rows: list[PolicySummary], path: Path) -> Path:
    sizes = sorted({r.update_size_bytes for r in rows})
    figure, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.5), squeeze=False)
    for axis, size in zip(axes[0], sizes, strict=True):
        at_size = sorted(
            (r for r in rows if r.update_size_bytes == size), key=lambda r: r.median_hours
        )
        labels = [r.label for r in at_size]
        medians = np.array([r.median_hours for r in at_size])
        finite = np.isfinite(medians)
        cap = np.nanmax(np.where(finite, medians, np.nan)) * 1.3 if finite.any() else 1.0
        shown = np.where(finite, medians, cap)
        low = [m - min((h for h in r.tta_hours if math.isfinite(h)), default=m)
               for m, r in zip(shown, at_size, strict=True)]  # fmt: skip
        high = [max((h for h in r.tta_hours if math.isfinite(h)), default=m) - m
                for m, r in zip(shown, at_size, strict=True)]  # fmt: skip
        colours = ["tab:green" if lab.startswith("powertrip") else "tab:grey" for lab in labels]
        axis.barh(labels, shown, xerr=[np.maximum(low, 0), np.maximum(high, 0)], color=colours,
                  hatch=None)  # fmt: skip
        for i, ok in enumerate(finite):
            if not ok:
                axis.text(shown[i], i, " not reached", va="center")
        axis.invert_yaxis()
        axis.set_xlabel("time to accuracy (hours, median; bars: range over seeds)")
        axis.set_title(f"update {format_size_bytes(size)}")
    return _save(plt, figure, path)


def _tta_vs_k(plt: Any, runs: list[dict[str, Any]], sizes: list[float], path: Path) -> Path:
    figure, axis = plt.subplots(figsize=(6.5, 4.5))
    for size in sizes:
        curve = sweep_curve(runs, size)
        ks = list(curve)
        median = [float(np.median(curve[k])) for k in ks]
        low = [float(np.min(curve[k])) for k in ks]
        high = [float(np.max(curve[k])) for k in ks]
        line = axis.plot(ks, median, marker="o", label=f"update {format_size_bytes(size)}")[0]
        axis.fill_between(ks, low, high, alpha=0.15, color=line.get_color())
        best = best_static_k(runs, size)
        if best is not None:
            axis.axvline(best, color="tab:red", linestyle="--", linewidth=1)
    axis.set_xlabel("sites k (static-k, top k by power-to-cost)")
    axis.set_ylabel("time to accuracy (hours)")
    axis.set_title("TTA vs number of sites (dashed: static optimum)")
    axis.legend()
    return _save(plt, figure, path)


def _first_seed_run(runs: list[dict[str, Any]], size: float, prefix: str) -> dict[str, Any] | None:
    matching = [r for r in runs if r["update_size_bytes"] == size and r["label"].startswith(prefix)]
    return min(matching, key=lambda r: r["seed"]) if matching else None


def _sites_over_time(plt: Any, runs: list[dict[str, Any]], size: float, path: Path) -> Path:
    figure, axis = plt.subplots(figsize=(6.5, 4.5))
    run = _first_seed_run(runs, size, "powertrip")
    if run is not None:
        hours = [0.0] + [x["end_time_s"] / 3600 for x in run["round_log"]]
        counts = [len(x["selected"]) for x in run["round_log"]]
        axis.step(hours[:-1], counts, where="post", label=f"PowerTrip (seed {run['seed']})")
        if counts:
            axis.fill_between(hours[:-1], counts, step="post", alpha=0.15)
    best = best_static_k(runs, size)
    if best is not None:
        axis.axhline(best, color="tab:red", linestyle="--", label=f"static-optimal k={best}")
    axis.set_xlabel("simulated time (hours)")
    axis.set_ylabel("sites selected")
    axis.set_title("sites per round over time")
    axis.legend()
    return _save(plt, figure, path)


def _accuracy_vs_time(
    plt: Any, runs: list[dict[str, Any]], size: float, target: float, path: Path
) -> Path:
    figure, axis = plt.subplots(figsize=(7, 4.5))
    labels = sorted({r["label"] for r in runs if r["sweep_k"] is None})
    best = best_static_k(runs, size)
    if best is not None:
        labels.append(f"sweep k={best}")
    for label in labels:
        run = _first_seed_run(runs, size, label)
        if run is None:
            continue
        hours = [x["end_time_s"] / 3600 for x in run["round_log"]]
        accuracy = [x["accuracy"] for x in run["round_log"]]
        name = f"static-optimal (k={best})" if label.startswith("sweep") else label
        axis.plot(hours, accuracy, label=name, linewidth=2 if label.startswith("powertrip") else 1)
    axis.axhline(target, color="black", linestyle=":", linewidth=1)
    axis.set_xlabel("simulated time (hours)")
    axis.set_ylabel("held-out accuracy")
    axis.set_title("accuracy over simulated time (first seed)")
    axis.legend(fontsize=7)
    return _save(plt, figure, path)
