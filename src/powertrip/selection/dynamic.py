"""PowerTrip's dynamic greedy policy (paper Algorithm 1, DESIGN §3 reconstruction).

Start with the k_0 best sites by the Eq.8 score; after every round, look at the counts within
`step_sites` of the current one and move to the count with the best projected accuracy gained
per second. The projection for k' sites is

    dA(k')  = g * log(1 + k')            g = mean over the last w rounds of dA_j / log(1 + k_j)
    T(k')   = C / mean(a_1..a_k') + max_{i <= k'} T_comm,i
                                           C = mean over the last w rounds of T_comp,j * mean(a)_j

`g` is the recent accuracy trend normalised by the number of workers (it equals the DESIGN's
g * log(1 + k') / log(1 + k) when the last w rounds all used k sites, and stays meaningful when
they did not); `C` is the compute constant fitted from the observed rounds. Sites are re-ranked
every round with their current power.

Choices the paper leaves open, all settings:
- shrinking waits for `patience_rounds` trailing rounds whose realised efficiency (Eq.5) did not
  beat the round before; until then the best count that does not shrink is taken;
- with no positive accuracy trend (g <= 0) there is no evidence for any move: the count holds;
- ties between counts go to the smaller count (less communication for the same estimate).
Stopping at the target accuracy or at a round limit is the round loop's (`should_stop`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from powertrip.model.sites import IntArray
from powertrip.selection.base import RoundOutcome, RoundView, Selection
from powertrip.selection.policies import require
from powertrip.selection.ranking import Ranker, ranking_key, top_indices


@dataclass(frozen=True)
class CandidateEstimate:
    """The projection for one candidate count k'."""

    site_count: int
    projected_gain: float
    estimated_round_time_s: float

    @property
    def projected_efficiency(self) -> float:
        """Projected accuracy gained per second, dA(k') / T(k')."""
        return self.projected_gain / self.estimated_round_time_s


@dataclass(frozen=True)
class Decision:
    """A dynamic decision and why: the chosen count, the ranked sites, every estimate."""

    site_count: int
    ranked_indices: IntArray
    estimates: tuple[CandidateEstimate, ...]
    reason: str

    @property
    def selected_indices(self) -> IntArray:
        """The chosen sites, best first."""
        return self.ranked_indices[: self.site_count]


@dataclass(frozen=True)
class PowerTripPolicy:
    """Grow (or, with patience, shrink) the site count while accuracy per second improves."""

    initial_sites: int | None = None
    initial_fraction: float = 0.1
    window_rounds: int = 3
    step_sites: int = 4
    patience_rounds: int = 2
    ranker: Ranker = Ranker.POWER_TO_COST
    name: ClassVar[str] = "powertrip"

    def __post_init__(self) -> None:
        if self.initial_sites is not None:
            require(self.name, "initial_sites", self.initial_sites >= 1, "must be >= 1",
                    self.initial_sites)  # fmt: skip
        require(self.name, "initial_fraction", 0 < self.initial_fraction <= 1,
                "must be in (0, 1]", self.initial_fraction)  # fmt: skip
        require(self.name, "window_rounds", self.window_rounds >= 1, "must be >= 1",
                self.window_rounds)  # fmt: skip
        require(self.name, "step_sites", self.step_sites >= 1, "must be >= 1", self.step_sites)
        require(self.name, "patience_rounds", self.patience_rounds >= 0, "must be >= 0",
                self.patience_rounds)  # fmt: skip

    def initial_count(self, site_total: int) -> int:
        """k_0: `initial_sites` if set, else ceil(initial_fraction x N), within [1, N]."""
        wanted = self.initial_sites or math.ceil(self.initial_fraction * site_total)
        return max(1, min(site_total, wanted))

    def select(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Selection:
        """The best-ranked sites, as many as `decide` chooses."""
        return Selection(self.decide(view, history, rng).selected_indices)

    def decide(
        self, view: RoundView, history: Sequence[RoundOutcome], rng: np.random.Generator
    ) -> Decision:
        """Choose the next count and rank the sites, keeping the estimates for inspection."""
        site_total = len(view.sites)
        key = ranking_key(self.ranker, view, rng)
        if not history:
            k = self.initial_count(site_total)
            return Decision(k, top_indices(key, k), (), "first round: k_0 best-ranked sites")

        current = max(1, min(site_total, history[-1].site_count))
        lowest = max(1, current - self.step_sites)
        highest = min(site_total, current + self.step_sites)
        ranked = top_indices(key, highest)
        estimates = self._estimate(view, history, ranked, np.arange(lowest, highest + 1))

        if estimates[0].projected_gain <= 0:
            return Decision(current, ranked, estimates, "no positive accuracy trend: hold")
        may_shrink = self._rounds_without_improvement(history) >= self.patience_rounds
        allowed = [e for e in estimates if may_shrink or e.site_count >= current]
        best = max(allowed, key=lambda e: e.projected_efficiency)  # first max = smaller count
        if best.site_count > current:
            reason = "grow: a larger count projects more accuracy per second"
        elif best.site_count < current:
            reason = "shrink: a smaller count projects more accuracy per second"
        else:
            reason = "hold: the current count projects the most accuracy per second"
            if not may_shrink and max(estimates, key=lambda e: e.projected_efficiency) != best:
                reason = "hold: shrinking would help but patience has not run out"
        return Decision(best.site_count, ranked, estimates, reason)

    def _estimate(
        self,
        view: RoundView,
        history: Sequence[RoundOutcome],
        ranked: IntArray,
        counts: IntArray,
    ) -> tuple[CandidateEstimate, ...]:
        recent = history[-self.window_rounds :]
        gain_per_log_site = float(
            np.mean([h.accuracy_gain / math.log1p(h.site_count) for h in recent])
        )
        compute_constant = float(
            np.mean([h.compute_time_s * h.mean_power_available_ratio for h in recent])
        )
        power = view.sites.power_available_ratio[ranked]
        mean_power = np.cumsum(power)[counts - 1] / counts
        slowest_link_s = np.maximum.accumulate(view.communication_time_s[ranked])[counts - 1]
        round_time = compute_constant / mean_power + slowest_link_s
        gain = gain_per_log_site * np.log1p(counts)
        return tuple(
            CandidateEstimate(int(k), float(g), float(t))
            for k, g, t in zip(counts, gain, round_time, strict=True)
        )

    def _rounds_without_improvement(self, history: Sequence[RoundOutcome]) -> int:
        """Trailing rounds whose realised efficiency did not beat the round before them."""
        stalled = 0
        for newer, older in zip(reversed(history[1:]), reversed(history[:-1]), strict=True):
            if newer.efficiency > older.efficiency or stalled >= self.patience_rounds:
                break
            stalled += 1
        return stalled


def should_stop(history: Sequence[RoundOutcome], target_accuracy: float, max_rounds: int) -> bool:
    """Algorithm 1's stop rule: the target accuracy is reached, or the round budget is spent."""
    if not history:
        return max_rounds <= 0
    return history[-1].accuracy >= target_accuracy or len(history) >= max_rounds
