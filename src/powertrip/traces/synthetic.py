"""Synthetic power-domain traces calibrated to Google PowerData2019's published statistics.

Ten cells (a..j) and 57 power domains, as published (cells i and j are single domains). Each
cell's mean production utilisation lies in the published 0.49..0.74 (evenly spread, assigned to
cells in a seeded order); every domain adds a daily cycle (amplitude 2-6% of capacity, a cell
phase plus a small domain jitter) and AR(1) noise with strongly correlated 5-minute steps
(phi = 0.98). Files are written in the full published layout, rows shuffled as published,
with about 0.5% of values flagged bad (and garbage in them), so that the one loader
(`powertrip.traces.google`) serves real and synthetic traces alike.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from pathlib import Path

import numpy as np

from powertrip.traces.google import FULL_COLUMNS, STEP_S

CELLS = "abcdefghij"
DOMAINS_PER_CELL = {"a": 7, "b": 7, "c": 7, "d": 7, "e": 7, "f": 7, "g": 7, "h": 6, "i": 1, "j": 1}
MEAN_UTIL_RANGE = (0.49, 0.74)
"""Published range of the cells' mean production utilisation; cell means are spread inside it
with a margin of 0.005 so that noise never carries a cell's mean outside."""
AR_PHI = 0.98
AR_SIGMA = 0.004
BAD_FRACTION = 0.005
DAY_S = 86_400.0


def generate_traces(
    directory: Path, seed: int = 0, days: float = 31.0, cells: str = CELLS
) -> list[Path]:
    """Write one `cell<c>_pdu<n>.csv.gz` per power domain; returns the paths."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    low, high = MEAN_UTIL_RANGE
    spread = np.linspace(low + 0.005, high - 0.005, len(CELLS))
    means = dict(zip(CELLS, rng.permutation(spread), strict=True))
    steps = int(days * DAY_S / STEP_S)
    times_s = 600.0 + STEP_S * np.arange(steps)
    paths = []
    for cell in cells:
        phase = rng.uniform(0, 2 * math.pi)
        count = DOMAINS_PER_CELL[cell]
        jitter = rng.normal(0, 0.015, count) if count > 1 else np.zeros(1)
        jitter -= jitter.mean()  # domains differ, the cell keeps its mean
        for domain in range(1, count + 1):
            util = _domain_util(rng, means[cell] + jitter[domain - 1], phase, times_s)
            path = directory / f"cell{cell}_pdu{domain}.csv.gz"
            _write(path, rng, cell, f"{cell}{domain}", times_s, util)
            paths.append(path)
    return paths


def _domain_util(
    rng: np.random.Generator, cell_mean: float, phase: float, times_s: np.ndarray
) -> np.ndarray:
    mean = cell_mean
    amplitude = rng.uniform(0.02, 0.06)
    cycle = amplitude * np.sin(2 * math.pi * times_s / DAY_S + phase + rng.normal(0, 0.2))
    shocks = rng.normal(0, AR_SIGMA, times_s.size)
    noise = np.empty(times_s.size)
    noise[0] = shocks[0] / math.sqrt(1 - AR_PHI**2)
    for i in range(1, times_s.size):
        noise[i] = AR_PHI * noise[i - 1] + shocks[i]
    result: np.ndarray = np.clip(mean + cycle + noise, 0.05, 0.98)
    return result


def _write(
    path: Path,
    rng: np.random.Generator,
    cell: str,
    pdu: str,
    times_s: np.ndarray,
    production: np.ndarray,
) -> None:
    measured = np.clip(production + np.abs(rng.normal(0.01, 0.005, production.size)), 0, 1)
    bad_production = rng.random(production.size) < BAD_FRACTION
    bad_measured = rng.random(production.size) < BAD_FRACTION
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FULL_COLUMNS)
    for i in rng.permutation(production.size):
        writer.writerow([
            int(times_s[i] * 1e6),
            cell,
            pdu,
            "NaN" if bad_measured[i] else f"{measured[i]:.4f}",
            f"{rng.uniform(1.5, 9.0):.4f}" if bad_production[i] else f"{production[i]:.4f}",
            "true" if bad_measured[i] else "false",
            "true" if bad_production[i] else "false",
        ])  # fmt: skip
    path.write_bytes(gzip.compress(buffer.getvalue().encode(), mtime=0))
