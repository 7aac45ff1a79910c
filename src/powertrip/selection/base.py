"""Value types shared by every policy: what a policy sees, what it returns, what it learns from.

A policy is pure: `select(view, history, rng)` maps the candidates of this round, the outcomes
of the rounds so far and an injected random generator to a `Selection`. It keeps no state of
its own, so a job resumed from its stored round history makes the same choices it would have
made without the interruption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from powertrip.errors import InvalidValueError
from powertrip.model.equations import (
    REFERENCE_UPDATE_SIZE_BYTES,
    FloatArray,
    PowerCostScore,
    communication_time_s,
    power_cost_weights,
    power_to_cost_score,
)
from powertrip.model.sites import IntArray, SiteTable


@dataclass(frozen=True, eq=False)
class RoundView:
    """The candidates of one round and the workload facts that price their links.

    Derived arrays (Eq.3 communication times, Eq.8 scores) are computed once, on first use.
    """

    sites: SiteTable
    update_size_bytes: float
    transfers_per_round: int = 1
    reference_update_size_bytes: float = REFERENCE_UPDATE_SIZE_BYTES

    def __post_init__(self) -> None:
        # Validates both sizes and fails early, before any policy runs.
        power_cost_weights(self.update_size_bytes, self.reference_update_size_bytes)

    @cached_property
    def communication_time_s(self) -> FloatArray:
        """Eq.3 per site for this round's update size."""
        return communication_time_s(
            self.sites.distance_km,
            self.sites.bandwidth_bytes_per_s,
            self.update_size_bytes,
            self.transfers_per_round,
        )

    @cached_property
    def power_cost(self) -> PowerCostScore:
        """Eq.8 per site, with weights set by the update size."""
        alpha, beta = power_cost_weights(self.update_size_bytes, self.reference_update_size_bytes)
        return power_to_cost_score(self.sites.power_w, self.communication_time_s, alpha, beta)


@dataclass(frozen=True)
class Selection:
    """The sites chosen for one round, best-ranked first.

    `centralized` marks the centralized baseline: one site trains as if it were the only
    datacenter (the simulator gives it all the training data) and runs with
    min(its availability, `power_cap_ratio`), emulating a site capped by its grid.
    """

    site_indices: IntArray
    power_cap_ratio: float | None = None
    centralized: bool = False

    def __post_init__(self) -> None:
        self.site_indices.setflags(write=False)

    def __len__(self) -> int:
        return int(self.site_indices.size)


@dataclass(frozen=True)
class RoundOutcome:
    """What one finished round teaches a policy.

    `site_count` is the number of sites the policy chose; `compute_time_s` is the round's
    compute part (slowest local training) and `communication_time_s` its Eq.4 part;
    `mean_power_available_ratio` is the mean availability of the chosen sites that round.
    """

    site_count: int
    accuracy: float
    accuracy_gain: float
    round_time_s: float
    compute_time_s: float
    communication_time_s: float
    mean_power_available_ratio: float

    def __post_init__(self) -> None:
        if self.site_count < 1:
            raise InvalidValueError(f"round outcome site_count must be >= 1, got {self.site_count}")
        for name in ("accuracy", "accuracy_gain"):
            if not math.isfinite(getattr(self, name)):
                raise InvalidValueError(f"round outcome {name} must be finite")
        for name in ("round_time_s", "compute_time_s", "communication_time_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidValueError(
                    f"round outcome {name} must be finite and >= 0, got {value}"
                )
        if not self.round_time_s > 0:
            raise InvalidValueError("round outcome round_time_s must be > 0")
        if not 0 < self.mean_power_available_ratio <= 1:
            raise InvalidValueError(
                "round outcome mean_power_available_ratio must be in (0, 1], "
                f"got {self.mean_power_available_ratio}"
            )

    @property
    def efficiency(self) -> float:
        """Eq.5 realised by this round: accuracy gained per second."""
        return self.accuracy_gain / self.round_time_s


class Policy(Protocol):
    """Chooses the sites of the next round; pure and seeded through `rng`."""

    @property
    def name(self) -> str:
        """The registry name of the policy (`static-k`, `powertrip`, ...)."""
        ...

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """The sites of the next round given the rounds so far."""
        ...
