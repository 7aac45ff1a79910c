"""Rankers, Eq.8 weighting by update size, and exact partial top-k."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from powertrip.model.sites import SiteTable
from powertrip.selection import RoundView, rank, top_indices
from powertrip.selection.ranking import Ranker
from support import law_table


@pytest.mark.parametrize(
    ("ranker", "first"),
    [
        (Ranker.LOWEST_LATENCY, "near-weak"),
        (Ranker.HIGHEST_POWER, "far-strong"),
        (Ranker.POWER_TO_COST, "mid-balanced"),
    ],
)
def test_each_ranker_puts_a_different_site_first(
    trade_off_sites: SiteTable, rng: np.random.Generator, ranker: Ranker, first: str
) -> None:
    """On near-weak / far-strong / balanced sites the three criteria disagree."""
    order = rank(ranker, RoundView(trade_off_sites, 1.5e9), rng)
    assert trade_off_sites.site_ids[order[0]] == first
    assert sorted(order.tolist()) == [0, 1, 2]


def test_random_ranker_depends_only_on_the_seed(trade_off_sites: SiteTable) -> None:
    """The same seed gives the same order; over many seeds every site comes first."""
    view = RoundView(trade_off_sites, 1.5e9)
    first = {int(rank(Ranker.RANDOM, view, np.random.default_rng(s))[0]) for s in range(40)}
    assert first == {0, 1, 2}
    again = [rank(Ranker.RANDOM, view, np.random.default_rng(3)).tolist() for _ in range(2)]
    assert again[0] == again[1]


@pytest.mark.parametrize(("size_bytes", "first"), [(1e9, "far-strong"), (2e9, "near-weak")])
def test_update_size_shifts_power_to_cost(
    rng: np.random.Generator, size_bytes: float, first: str
) -> None:
    """1 GB favours the powerful far site, 2 GB the cheap near one (beta = S/(S+1.5 GB))."""
    sites = law_table(["near-weak", "far-strong"], [100.0, 9000.0], [0.2, 1.0])
    order = rank(Ranker.POWER_TO_COST, RoundView(sites, size_bytes), rng)
    assert sites.site_ids[order[0]] == first


def test_top_indices_breaks_ties_by_table_order() -> None:
    """Equal keys keep table order, in the partial selection as in the full ranking."""
    key = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 2.0])
    assert top_indices(key, 6).tolist() == [1, 3, 2, 4, 5, 0]
    assert top_indices(key, 3).tolist() == [1, 3, 2]
    assert top_indices(key, 4).tolist() == [1, 3, 2, 4]
    assert top_indices(key, 0).tolist() == []
    assert top_indices(key, 99).tolist() == [1, 3, 2, 4, 5, 0]


@given(
    key=hnp.arrays(
        np.float64,
        st.integers(1, 60),
        elements=st.sampled_from([0.0, 0.5, 1.0, -2.0, 3.25]) | st.floats(-10, 10),
    ),
    count=st.integers(0, 70),
)
def test_top_indices_equals_a_stable_full_sort(key: np.ndarray, count: int) -> None:
    """The partition-based top-k is exactly the prefix of a stable descending sort."""
    expected = np.argsort(-key, kind="stable")[:count]
    assert top_indices(key, count).tolist() == expected.tolist()
