"""Split training samples among sites: IID, Dirichlet non-IID, or natural (by writer/speaker).

Dirichlet: for every class, its samples are divided among the sites in proportions drawn from
Dir(alpha); small alpha gives each site few classes (alpha = 0.3, the paper presets' default,
leaves most sites with two or three dominant digits). The draw is repeated until every site
holds at least `min_samples`, so no site trains on an empty or near-empty shard.
Natural: whole groups (writers, speakers) are dealt to sites round-robin in a seeded order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from powertrip.errors import InvalidValueError

IntArray = NDArray[np.int64]


def iid(sample_count: int, sites: int, rng: np.random.Generator) -> list[IntArray]:
    """Shuffled samples dealt into `sites` near-equal shards."""
    _check(sample_count, sites, 1)
    return [np.sort(s) for s in np.array_split(rng.permutation(sample_count), sites)]


def dirichlet(
    labels: IntArray, sites: int, alpha: float, rng: np.random.Generator, min_samples: int = 8
) -> list[IntArray]:
    """Per-class Dirichlet(alpha) proportions; redrawn (at most 1,000 times) until every site
    holds at least `min_samples` samples."""
    _check(labels.size, sites, min_samples)
    if not alpha > 0:
        raise InvalidValueError(f"Dirichlet alpha must be > 0, got {alpha}")
    by_class = [rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)]
    for _ in range(1000):
        shards: list[list[IntArray]] = [[] for _ in range(sites)]
        for members in by_class:
            proportions = rng.dirichlet(np.full(sites, alpha))
            cuts = (np.cumsum(proportions)[:-1] * members.size).astype(np.int64)
            for site, part in enumerate(np.split(members, cuts)):
                shards[site].append(part)
        result = [np.sort(np.concatenate(parts)) for parts in shards]
        if min(r.size for r in result) >= min_samples:
            return result
    raise InvalidValueError(
        f"Dirichlet(alpha={alpha}) could not give each of {sites} sites {min_samples} of "
        f"{labels.size} samples in 1,000 draws: raise alpha, or use fewer sites"
    )


def natural(groups: IntArray, sites: int, rng: np.random.Generator) -> list[IntArray]:
    """Whole groups (writers, speakers) dealt round-robin to sites in a seeded order."""
    unique = np.unique(groups)
    if unique.size < sites:
        raise InvalidValueError(
            f"a natural partition needs at least one group per site: {unique.size} groups "
            f"for {sites} sites"
        )
    owner = {int(g): i % sites for i, g in enumerate(rng.permutation(unique))}
    site_of = np.asarray([owner[int(g)] for g in groups])
    return [np.flatnonzero(site_of == s) for s in range(sites)]


def _check(sample_count: int, sites: int, min_samples: int) -> None:
    if sites < 1:
        raise InvalidValueError(f"need at least one site, got {sites}")
    if sample_count < sites * min_samples:
        raise InvalidValueError(
            f"{sample_count} samples cannot give {sites} sites {min_samples} each"
        )
