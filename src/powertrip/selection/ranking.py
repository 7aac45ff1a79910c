"""Rankers: orderings of the candidates by one criterion (DESIGN §3).

Each ranker is a key, higher is better; `top_indices` turns a key into the best m sites in
order. It selects by partition instead of a full sort, so taking the best k of a million sites
costs about one pass over the data plus sorting k, and it breaks ties by table order exactly as
a stable full sort would, so partial and full rankings always agree.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from powertrip.model.equations import FloatArray
from powertrip.model.sites import IntArray
from powertrip.selection.base import RoundView


class Ranker(StrEnum):
    """The orderings of the paper: two single-metric ones, Eq.8, and a random baseline."""

    LOWEST_LATENCY = "lowest-latency"
    HIGHEST_POWER = "highest-power"
    POWER_TO_COST = "power-to-cost"
    RANDOM = "random"


def ranking_key(ranker: Ranker, view: RoundView, rng: np.random.Generator) -> FloatArray:
    """The ranker's key per site: higher ranks first. Only `random` draws from `rng`."""
    if ranker is Ranker.LOWEST_LATENCY:
        return -view.communication_time_s
    if ranker is Ranker.HIGHEST_POWER:
        return view.sites.power_w
    if ranker is Ranker.POWER_TO_COST:
        return view.power_cost.score
    return rng.random(len(view.sites))


def top_indices(key: FloatArray, count: int) -> IntArray:
    """Indices of the `count` largest keys, best first, ties broken by lower index."""
    n = int(key.size)
    count = max(0, min(count, n))
    if count == 0:
        return np.empty(0, dtype=np.int64)
    negated = -key
    if count == n:
        chosen = np.arange(n, dtype=np.int64)
    else:
        part = np.argpartition(negated, count - 1)
        threshold = negated[part[count - 1]]
        if np.count_nonzero(negated <= threshold) == count:
            chosen = np.sort(part[:count])
        else:  # keys equal to the cut straddle it: keep the lowest indices among them
            above = np.flatnonzero(negated < threshold)
            ties = np.flatnonzero(negated == threshold)[: count - above.size]
            chosen = np.sort(np.concatenate([above, ties]))
    # `chosen` is in index order, so a stable sort breaks ties by index; the unstable sort is
    # several times faster and gives the same answer whenever no two keys are equal.
    keys = negated[chosen]
    order = np.argsort(keys)
    ordered = keys[order]
    if np.any(ordered[1:] == ordered[:-1]):
        order = np.argsort(keys, kind="stable")
    return chosen[order].astype(np.int64)


def rank(ranker: Ranker, view: RoundView, rng: np.random.Generator) -> IntArray:
    """Every candidate in ranker order."""
    return top_indices(ranking_key(ranker, view, rng), len(view.sites))
