"""Physical constants and unit conversions used across the model.

Sizes follow SI for `GB` (10**9 bytes, as the paper's "1 GB / 1.5 GB / 2 GB" updates) and IEC
for `GiB` (2**30 bytes); a bare number is bytes.
"""

import math
import re
from typing import TypeVar

import numpy as np

from powertrip.errors import InvalidValueError

ArrayT = TypeVar("ArrayT", float, np.ndarray)

KM_PER_MILE = 1.609344
FIBRE_SPEED_M_PER_S = 2.0e8
"""Propagation speed of light in optical fibre (about two thirds of c), DESIGN §2."""

_SIZE_UNITS_BYTES = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size_bytes(text: str | float | int) -> float:
    """Parse an update size such as `1.5GB`, `512MiB` or `2e9` into bytes (must be > 0)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _SIZE_PATTERN.match(str(text))
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _SIZE_UNITS_BYTES:
            valid = ", ".join(u.upper() for u in _SIZE_UNITS_BYTES if u)
            raise InvalidValueError(
                f"update size {text!r} is not a size: use a number of bytes or a number "
                f"followed by one of {valid} (GB = 10^9 bytes, GiB = 2^30 bytes)"
            )
        value = float(match.group(1)) * _SIZE_UNITS_BYTES[unit]
    if not math.isfinite(value) or value <= 0:
        raise InvalidValueError(f"update size must be a finite number of bytes > 0, got {text!r}")
    return value


def format_size_bytes(size_bytes: float) -> str:
    """Format a byte count with the largest SI unit that keeps the number >= 1 (`1.5 GB`)."""
    for unit, factor in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:.3g} {unit}"
    return f"{size_bytes:.0f} B"


def miles_to_km(miles: ArrayT) -> ArrayT:
    """Convert statute miles (a number or an array) to kilometres."""
    return miles * KM_PER_MILE
