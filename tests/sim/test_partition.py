"""Splitting data among sites."""

import numpy as np
import pytest

from powertrip.errors import InvalidValueError
from powertrip.sim import partition

LABELS = np.repeat(np.arange(10), 100)


def test_iid_covers_every_sample_once() -> None:
    """IID shards are a partition of all samples into near-equal parts."""
    shards = partition.iid(1000, 7, np.random.default_rng(0))
    assert sorted(np.concatenate(shards).tolist()) == list(range(1000))
    assert {s.size for s in shards} <= {142, 143}


def test_dirichlet_is_skewed_reproducible_and_has_a_floor() -> None:
    """Small alpha concentrates classes; every site keeps the minimum; same seed, same split."""
    shards = partition.dirichlet(LABELS, 20, 0.3, np.random.default_rng(1), min_samples=8)
    again = partition.dirichlet(LABELS, 20, 0.3, np.random.default_rng(1), min_samples=8)
    assert [s.tolist() for s in shards] == [s.tolist() for s in again]
    assert sorted(np.concatenate(shards).tolist()) == list(range(1000))
    assert min(s.size for s in shards) >= 8
    dominant = [np.bincount(LABELS[s], minlength=10).max() / s.size for s in shards]
    assert np.median(dominant) > 0.3  # IID shards of 50 give about 0.2


def test_dirichlet_that_cannot_fit_says_what_to_change() -> None:
    """An impossible floor is an error suggesting a larger alpha or fewer sites."""
    with pytest.raises(InvalidValueError, match="raise alpha"):
        partition.dirichlet(LABELS, 100, 0.01, np.random.default_rng(0), min_samples=9)
    with pytest.raises(InvalidValueError, match="cannot give 200 sites"):
        partition.dirichlet(LABELS, 200, 1.0, np.random.default_rng(0), min_samples=8)


def test_natural_keeps_groups_whole() -> None:
    """Each writer's samples all go to one site."""
    groups = np.repeat(np.arange(30), 5)
    shards = partition.natural(groups, 4, np.random.default_rng(0))
    owners = {int(g): i for i, s in enumerate(shards) for g in np.unique(groups[s])}
    assert len(owners) == 30
    assert sum(s.size for s in shards) == 150
    with pytest.raises(InvalidValueError, match="one group per site"):
        partition.natural(groups, 31, np.random.default_rng(0))
