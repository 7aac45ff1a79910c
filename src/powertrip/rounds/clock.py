"""Time as a seam: the round loop reads time only through a `Clock`.

The simulator uses `SimulatedClock`, advanced by the simulated sites by each round's Eq.7
time; services use a wall clock (in the services, never here): the core never reads real time.
"""

from __future__ import annotations

import math
from typing import Protocol

from powertrip.errors import InvalidValueError


class Clock(Protocol):
    """Seconds since an arbitrary origin; only differences matter."""

    def now(self) -> float:
        """The current time in seconds."""
        ...


class SimulatedClock:
    """A clock that moves only when told to."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s

    def now(self) -> float:
        """The simulated time in seconds."""
        return self._now_s

    def advance(self, seconds: float) -> None:
        """Move time forward; time never goes back."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise InvalidValueError(f"a clock advances by finite seconds >= 0, got {seconds}")
        self._now_s += seconds
