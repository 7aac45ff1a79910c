"""The provisioning baselines of the paper (DESIGN §3): how many sites, and which.

Each policy is a frozen dataclass whose fields are its settings, checked in `__post_init__`,
with one pure method `select`. A fixed count larger than the candidates of a round (sites can
drop out) selects all of them: the count is a ceiling, not an input error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from powertrip.errors import PolicyConfigError, SelectionError
from powertrip.model.units import KM_PER_MILE
from powertrip.selection.base import RoundOutcome, RoundView, Selection
from powertrip.selection.ranking import Ranker, ranking_key, top_indices


def require(policy: str, setting: str, ok: bool, requirement: str, value: object) -> None:
    """Raise `PolicyConfigError` naming the policy and setting unless `ok`."""
    if not ok:
        raise PolicyConfigError(f"policy {policy!r}: {setting} {requirement}, got {value!r}")


@dataclass(frozen=True)
class AllSites:
    """Every candidate, every round: maximal power, and the slowest link of all."""

    name: ClassVar[str] = "all"

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """All sites, in table order."""
        return Selection(np.arange(len(view.sites), dtype=np.int64))


@dataclass(frozen=True)
class StaticK:
    """The best `k` sites by `ranker`, re-ranked every round (static-k; the sweep over k of the
    simulator turns it into the static-optimal baseline)."""

    k: int
    ranker: Ranker = Ranker.POWER_TO_COST
    name: ClassVar[str] = "static-k"

    def __post_init__(self) -> None:
        require(self.name, "k", self.k >= 1, "must be >= 1", self.k)

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """The top k by the ranker."""
        return Selection(top_indices(ranking_key(self.ranker, view, rng), self.k))


@dataclass(frozen=True)
class RandomK:
    """`k` sites drawn uniformly without replacement, anew every round."""

    k: int
    name: ClassVar[str] = "random-k"

    def __post_init__(self) -> None:
        require(self.name, "k", self.k >= 1, "must be >= 1", self.k)

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """A uniform draw of min(k, N) distinct sites."""
        n = len(view.sites)
        drawn = rng.choice(n, size=min(self.k, n), replace=False)
        return Selection(np.asarray(drawn, dtype=np.int64))


@dataclass(frozen=True)
class FixedRadius:
    """Every site within `radius_km` of the aggregator, nearest first.

    The paper's radius is 1000 miles (1609.344 km), where its measured bandwidth stays flat.
    """

    radius_km: float = 1000 * KM_PER_MILE
    name: ClassVar[str] = "fixed-radius"

    def __post_init__(self) -> None:
        require(
            self.name,
            "radius_km",
            math.isfinite(self.radius_km) and self.radius_km >= 0,
            "must be finite and >= 0",
            self.radius_km,
        )

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """Sites with distance_km <= radius_km; an empty radius is an error, not an empty round."""
        distance = view.sites.distance_km
        inside = np.flatnonzero(distance <= self.radius_km)
        if inside.size == 0:
            raise SelectionError(
                f"policy {self.name!r}: no site lies within {self.radius_km:g} km; the nearest "
                f"is {view.sites.site_ids[int(distance.argmin())]!r} at {distance.min():g} km"
            )
        return Selection(inside[np.argsort(distance[inside], kind="stable")].astype(np.int64))


@dataclass(frozen=True)
class Centralized:
    """One site, power-capped: training as if at a single datacenter limited by its grid.

    The site is the best by `ranker` (default the nearest link, as the paper's centralized
    baseline has no network overhead); it then runs with min(availability, power_cap_ratio).
    The paper's cases are 0.25 and 0.5.
    """

    power_cap_ratio: float = 0.25
    ranker: Ranker = Ranker.LOWEST_LATENCY
    name: ClassVar[str] = "centralized"

    def __post_init__(self) -> None:
        require(
            self.name,
            "power_cap_ratio",
            0 < self.power_cap_ratio <= 1,
            "must be in (0, 1]",
            self.power_cap_ratio,
        )

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """The single best site by the ranker, with the power cap attached."""
        best = top_indices(ranking_key(self.ranker, view, rng), 1)
        return Selection(best, power_cap_ratio=self.power_cap_ratio, centralized=True)
