"""Size parsing and unit conversions."""

import pytest

from powertrip.errors import InvalidValueError
from powertrip.model.units import format_size_bytes, miles_to_km, parse_size_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1GB", 1e9),
        ("1.5GB", 1.5e9),
        ("2 gb", 2e9),
        ("1GiB", 2**30),
        ("512MiB", 512 * 2**20),
        ("2e9", 2e9),
        ("100", 100.0),
        (1.5e9, 1.5e9),
    ],
)
def test_parse_size_accepts_si_iec_and_bytes(text: str | float, expected: float) -> None:
    """GB is 10^9 bytes, GiB 2^30, a bare number bytes."""
    assert parse_size_bytes(text) == expected


@pytest.mark.parametrize(
    "text", ["", "GB", "1.5 parsecs", "-1GB", "0", "nan", float("inf"), "1..5GB"]
)
def test_parse_size_rejects_non_sizes(text: str | float) -> None:
    """Anything that is not a positive finite size is an error naming the input."""
    with pytest.raises(InvalidValueError, match="update size"):
        parse_size_bytes(text)


def test_format_and_miles() -> None:
    """Sizes format with SI units; a mile is 1.609344 km."""
    assert format_size_bytes(1.5e9) == "1.5 GB"
    assert format_size_bytes(512) == "512 B"
    assert miles_to_km(1000) == pytest.approx(1609.344)
