"""Power availability over simulated time: a `PowerSource` gives a_i(t) for every site.

- `ConstantPower`: fixed per site (the paper's uniform mode draws U(0.1, 1.0) once per site).
- `TracePower`: spare power of real or synthetic power domains, a_i(t) = 1 - util(t), each
  site mapped onto a domain with its own time offset, the trace repeating when it runs out.
A site whose availability is 0 at some time simply has no power then: the simulated profile
source leaves it out of that round's candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from powertrip.errors import InvalidValueError
from powertrip.traces.google import PowerDomainTrace

FloatArray = NDArray[np.float64]


class PowerSource(Protocol):
    """Availability in [0, 1] of every site at a simulated time."""

    def availability(self, time_s: float) -> FloatArray:
        """One value per site."""
        ...


@dataclass(frozen=True, eq=False)
class ConstantPower:
    """Availability that never changes."""

    ratios: FloatArray

    def __post_init__(self) -> None:
        if not ((self.ratios > 0) & (self.ratios <= 1)).all():
            raise InvalidValueError("constant power availability must be in (0, 1]")

    def availability(self, time_s: float) -> FloatArray:
        """The fixed ratios."""
        return self.ratios


@dataclass(frozen=True, eq=False)
class TracePower:
    """Sites replaying the spare power of power domains, each from its own offset.

    `spare` is (domains, steps) on a regular `step_s` grid; site i reads domain `domain[i]`
    at step `(offset[i] + floor(t / step_s)) mod steps`.
    """

    spare: FloatArray
    step_s: float
    domain: NDArray[np.int64]
    offset_steps: NDArray[np.int64]

    @classmethod
    def from_traces(
        cls, traces: Sequence[PowerDomainTrace], sites: int, rng: np.random.Generator
    ) -> TracePower:
        """Map `sites` onto the domains (a seeded shuffle, round-robin) with random offsets."""
        if not traces:
            raise InvalidValueError("trace power needs at least one power domain")
        steps = min(t.spare_ratio.size for t in traces)
        step_s = traces[0].step_s
        if any(t.step_s != step_s for t in traces):
            raise InvalidValueError("all power domains must share one time step")
        spare = np.stack([t.spare_ratio[:steps] for t in traces])
        order = rng.permutation(len(traces))
        domain = order[np.arange(sites) % len(traces)].astype(np.int64)
        return cls(spare, step_s, domain, rng.integers(0, steps, sites))

    def availability(self, time_s: float) -> FloatArray:
        """Spare power of each site's domain at `time_s`."""
        step = (self.offset_steps + int(time_s // self.step_s)) % self.spare.shape[1]
        values: FloatArray = self.spare[self.domain, step]
        return values
