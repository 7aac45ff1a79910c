"""The PowerData2019 loader (both layouts) and the calibrated synthetic generator."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from powertrip.traces.google import FULL_COLUMNS, TraceError, load_power_domain, load_trace_dir
from powertrip.traces.synthetic import DOMAINS_PER_CELL, MEAN_UTIL_RANGE, generate_traces

HEADER = ",".join(FULL_COLUMNS)


def write(path: Path, text: str, compress: bool = False) -> Path:
    """Write a trace file, gzip-compressed if asked."""
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_full_layout_sorts_filters_and_prefers_production(tmp_path: Path, compress: bool) -> None:
    """Rows are sorted by time, flagged values skipped, spare = 1 - production utilisation."""
    text = "\n".join([
        HEADER,
        "1200000000,a,a1,0.50,0.40,false,false",
        "600000000,a,a1,0.55,0.45,false,false",
        "900000000,a,a1,0.90,7.00,false,true",   # production flagged: measured is used
        "1500000000,a,a1,NaN,9.00,true,true",    # both flagged: skipped
    ])  # fmt: skip
    trace = load_power_domain(write(tmp_path / "cella_pdu1.csv.gz", text, compress))
    np.testing.assert_allclose(trace.spare_ratio, [0.55, 0.10, 0.60])  # grid ends at 1200 s
    assert (trace.cell, trace.pdu, trace.step_s) == ("a", "a1", 300.0)
    assert (trace.rows_read, trace.rows_skipped) == (4, 1)


def test_reduced_layout_uses_measured_and_fills_gaps(tmp_path: Path) -> None:
    """The reduced export (no pdu column) reads; a missing 5-minute step repeats the last value."""
    text = "index,time,measured_power_util\n0,600000000,0.7\n1,1200000000,0.6\n"
    trace = load_power_domain(write(tmp_path / "cella_pdu10.csv", text))
    np.testing.assert_allclose(trace.spare_ratio, [0.3, 0.3, 0.4])
    assert (trace.cell, trace.pdu) == ("a", "pdu10")


def test_over_capacity_leaves_no_spare_power(tmp_path: Path) -> None:
    """Utilisation above 1 means the domain is over capacity: spare 0, not negative."""
    text = "index,time,measured_power_util\n0,600000000,1.2\n"
    assert load_power_domain(write(tmp_path / "x.csv", text)).spare_ratio.tolist() == [0.0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "600000000,a,a1,0.5,0.4,false,maybe",
            ":2: bad_production_power_data must be true or false",
        ),
        ("600000000,a,a1,0.5,abc,false,false", ":2: production_power_util is not a number"),
        ("600000000,a,a1,0.5,-0.2,false,false", ":2: production_power_util must be a finite"),
        ("600000000,a,a1,0.5", ":2: 4 fields, the header has 7"),
        ("soon,a,a1,0.5,0.4,false,false", ":2: time is not a number"),
        ("600000000,a,a1,NaN,NaN,true,true", "no usable rows"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    """A malformed row is an error naming the file and the line, never a silent skip."""
    path = write(tmp_path / "bad.csv", f"{HEADER}\n{body}\n")
    with pytest.raises(TraceError, match=message) as caught:
        load_power_domain(path)
    assert str(path) in str(caught.value)


def test_unknown_header_lists_the_layouts(tmp_path: Path) -> None:
    """A file of another format says which layouts are read."""
    with pytest.raises(TraceError, match="expected the published columns"):
        load_power_domain(write(tmp_path / "x.csv", "a,b\n1,2\n"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seven days of synthetic traces for every cell."""
    folder = tmp_path_factory.mktemp("traces")
    generate_traces(folder, seed=3, days=7)
    return folder


def test_generator_round_trips_through_the_loader(generated: Path) -> None:
    """The generator writes the published layout (unsorted, some rows flagged) that the loader
    reads back, for all 57 power domains of the 10 cells."""
    traces = load_trace_dir(generated)
    assert len(traces) == sum(DOMAINS_PER_CELL.values()) == 57
    assert {t.cell for t in traces} == set("abcdefghij")
    assert all(t.spare_ratio.size == 7 * 288 for t in traces)
    assert sum(t.rows_skipped for t in traces) > 0
    first = gzip.decompress((generated / "cella_pdu1.csv.gz").read_bytes()).decode().splitlines()
    times = [int(line.split(",")[0]) for line in first[1:]]
    assert times != sorted(times)


def test_generator_statistics_match_the_published_ranges(generated: Path) -> None:
    """Cell means lie in 0.49..0.74, with a daily cycle and strongly correlated 5-min steps."""
    traces = load_trace_dir(generated)
    low, high = MEAN_UTIL_RANGE
    for cell in "abcdefghij":
        mean = np.mean([t.production_util.mean() for t in traces if t.cell == cell])
        assert low <= mean <= high
    for trace in traces[:10]:
        util = trace.production_util - trace.production_util.mean()
        assert autocorrelation(util, 1) > 0.9
        # A day apart is more alike than half a day apart: the daily cycle.
        assert autocorrelation(util, 288) > autocorrelation(util, 144)


def autocorrelation(values: np.ndarray, lag: int) -> float:
    """Correlation of a series with itself `lag` steps later."""
    return float(np.corrcoef(values[:-lag], values[lag:])[0, 1])


def test_generator_is_deterministic(tmp_path: Path) -> None:
    """The same seed writes the same bytes."""
    a = generate_traces(tmp_path / "a", seed=1, days=1, cells="ij")
    b = generate_traces(tmp_path / "b", seed=1, days=1, cells="ij")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
