"""Google PowerData2019 power-domain traces (Sakalkar et al., ASPLOS 2020; CC-BY 4.0).

Two layouts are read, plain or gzip-compressed:
- the full published one, one file per power domain, columns `time, cell, pdu,
  measured_power_util, production_power_util, bad_measurement_data, bad_production_power_data`;
- the reduced export `index, time, pdu, measured_power_util` (shared/data/google-power-2019-cella;
  `pdu` may be missing, then the file name gives it).

`time` is microseconds. Rows are not sorted in the published files: they are sorted here.
A `bad_*` flag of `true` marks that value bad (the official analysis keeps `NOT bad_...`);
flagged values are skipped. Spare power is 1 - production utilisation where production is
good, else 1 - measured utilisation; utilisation above 1 (the domain over its capacity) leaves
no spare power, 0. The result is resampled to a regular grid (5 minutes) by carrying the last
value forward over gaps. Malformed rows are errors naming the file and line.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from powertrip.errors import PowerTripError

FULL_COLUMNS = (
    "time",
    "cell",
    "pdu",
    "measured_power_util",
    "production_power_util",
    "bad_measurement_data",
    "bad_production_power_data",
)
REDUCED_COLUMNS = ("time", "measured_power_util")
"""Required columns of the reduced export; `index` and `pdu` are optional there."""
STEP_S = 300.0


class TraceError(PowerTripError, ValueError):
    """A trace file cannot be read; the message names the file and the line."""


@dataclass(frozen=True, eq=False)
class PowerDomainTrace:
    """Spare power ratio of one power domain on a regular grid starting at `start_time_s`."""

    source: str
    cell: str
    pdu: str
    start_time_s: float
    step_s: float
    spare_ratio: NDArray[np.float64]
    rows_read: int
    rows_skipped: int

    @property
    def production_util(self) -> NDArray[np.float64]:
        """Utilisation implied by the spare ratio (1 - spare)."""
        return 1.0 - self.spare_ratio


def _lines(path: Path) -> Iterator[str]:
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise TraceError(f"{path}: cannot read trace file: {error.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise TraceError(f"{path}: corrupt gzip data: {error}") from None
    yield from io.StringIO(raw.decode("utf-8", errors="strict"))


def _flag(text: str, path: Path, line: int, column: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise TraceError(f"{path}:{line}: {column} must be true or false, got {text!r}")
    return value == "true"


def _util(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{path}:{line}: {column} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{path}:{line}: {column} must be a finite utilisation >= 0, got {text!r}")
    return value


def load_power_domain(path: Path, step_s: float = STEP_S) -> PowerDomainTrace:
    """Read one power domain's trace in either layout (see the module docstring)."""
    reader = csv.reader(_lines(path))
    header = tuple(c.strip() for c in next(reader, ()))
    if set(FULL_COLUMNS) <= set(header):
        full = True
    elif set(REDUCED_COLUMNS) <= set(header):
        full = False
    else:
        raise TraceError(
            f"{path}:1: unknown header {list(header)}; expected the published columns "
            f"{list(FULL_COLUMNS)} or the reduced {list(REDUCED_COLUMNS)}"
        )
    at = {name: header.index(name) for name in header}
    times: list[float] = []
    spares: list[float] = []
    skipped = 0
    cell, pdu = "", ""
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise TraceError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
        try:
            time_us = int(float(row[at["time"]]))
        except ValueError:
            raise TraceError(f"{path}:{line}: time is not a number: {row[at['time']]!r}") from None
        pdu = row[at["pdu"]] if "pdu" in at else pdu
        cell = row[at["cell"]] if full else cell
        if full and not _flag(
            row[at["bad_production_power_data"]], path, line, "bad_production_power_data"
        ):
            util = _util(row[at["production_power_util"]], path, line, "production_power_util")
        elif not full or not _flag(
            row[at["bad_measurement_data"]], path, line, "bad_measurement_data"
        ):
            util = _util(row[at["measured_power_util"]], path, line, "measured_power_util")
        else:
            skipped += 1
            continue
        times.append(time_us / 1e6)
        spares.append(min(1.0, max(0.0, 1.0 - util)))
    if not times:
        raise TraceError(f"{path}: no usable rows ({skipped} flagged bad)")
    named_cell, named_pdu = _names_from_file(path)
    return _on_grid(path, cell or named_cell, pdu or named_pdu, times, spares, step_s, skipped)


def _names_from_file(path: Path) -> tuple[str, str]:
    """`cella_pdu10.csv.gz` -> ("a", "pdu10")."""
    stem = path.name.split(".")[0]
    cell, _, pdu = stem.partition("_")
    return cell.removeprefix("cell"), pdu


def _on_grid(
    path: Path,
    cell: str,
    pdu: str,
    times: list[float],
    spares: list[float],
    step_s: float,
    skipped: int,
) -> PowerDomainTrace:
    order = np.argsort(np.asarray(times), kind="stable")
    sorted_times = np.asarray(times)[order]
    sorted_spare = np.asarray(spares)[order]
    grid = np.arange(sorted_times[0], sorted_times[-1] + step_s / 2, step_s)
    # Last observation at or before each grid point (the first one is the first observation).
    latest = np.searchsorted(sorted_times, grid + 1e-6, side="right") - 1
    return PowerDomainTrace(
        source=str(path),
        cell=cell,
        pdu=pdu,
        start_time_s=float(sorted_times[0]),
        step_s=step_s,
        spare_ratio=sorted_spare[latest],
        rows_read=len(times) + skipped,
        rows_skipped=skipped,
    )


def load_trace_dir(directory: Path) -> list[PowerDomainTrace]:
    """Every `*.csv` and `*.csv.gz` power-domain file in a folder, in name order."""
    files = sorted([*directory.glob("*.csv"), *directory.glob("*.csv.gz")])
    if not files:
        raise TraceError(f"{directory}: no *.csv or *.csv.gz power-domain files")
    return [load_power_domain(f) for f in files]
