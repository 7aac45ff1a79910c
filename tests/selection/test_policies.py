"""The provisioning baselines: all, static-k, random-k, fixed radius, centralized."""

import numpy as np
import pytest

from powertrip.errors import PolicyConfigError, SelectionError
from powertrip.model.sites import SiteTable
from powertrip.selection import (
    AllSites,
    Centralized,
    FixedRadius,
    RandomK,
    RoundView,
    StaticK,
)
from powertrip.selection.ranking import Ranker
from support import law_table


@pytest.fixture
def ring() -> SiteTable:
    """Ten sites, 500 km apart, power rising with distance."""
    return law_table(
        [f"s{i}" for i in range(10)],
        [500.0 * (i + 1) for i in range(10)],
        [0.1 * (i + 1) for i in range(10)],
    )


def test_all_selects_every_site(ring: SiteTable, rng: np.random.Generator) -> None:
    """`all` takes every candidate once."""
    assert AllSites().select(RoundView(ring, 1e9), (), rng).site_indices.tolist() == list(range(10))


@pytest.mark.parametrize(
    ("ranker", "expected"),
    [(Ranker.LOWEST_LATENCY, [0, 1, 2]), (Ranker.HIGHEST_POWER, [9, 8, 7])],
)
def test_static_k_takes_the_top_k_of_its_ranker(
    ring: SiteTable, rng: np.random.Generator, ranker: Ranker, expected: list[int]
) -> None:
    """static-k is the ranker's best k, best first."""
    chosen = StaticK(k=3, ranker=ranker).select(RoundView(ring, 1e9), (), rng)
    assert chosen.site_indices.tolist() == expected


def test_static_k_beyond_the_candidates_takes_them_all(
    ring: SiteTable, rng: np.random.Generator
) -> None:
    """k is a ceiling: with fewer candidates (sites dropped out) all of them are taken."""
    assert len(StaticK(k=50).select(RoundView(ring, 1e9), (), rng)) == 10


def test_random_k_draws_k_distinct_sites_per_seed(ring: SiteTable) -> None:
    """random-k draws k distinct sites; the same seed draws the same ones."""
    view = RoundView(ring, 1e9)
    draws = [
        RandomK(k=4).select(view, (), np.random.default_rng(s)).site_indices for s in (1, 1, 2)
    ]
    assert len(set(draws[0].tolist())) == 4
    assert draws[0].tolist() == draws[1].tolist()
    assert draws[0].tolist() != draws[2].tolist()


def test_fixed_radius_selects_exactly_the_sites_inside(
    ring: SiteTable, rng: np.random.Generator
) -> None:
    """Every site within the radius (inclusive), nearest first, and no other."""
    chosen = FixedRadius(radius_km=1500.0).select(RoundView(ring, 1e9), (), rng)
    assert chosen.site_indices.tolist() == [0, 1, 2]
    paper = FixedRadius().select(RoundView(ring, 1e9), (), rng)  # 1000 miles = 1609 km
    assert paper.site_indices.tolist() == [0, 1, 2]


def test_fixed_radius_with_no_site_inside_says_which_is_nearest(
    ring: SiteTable, rng: np.random.Generator
) -> None:
    """An empty radius is an error naming the nearest site, never an empty round."""
    with pytest.raises(SelectionError, match="'s0' at 500 km"):
        FixedRadius(radius_km=100.0).select(RoundView(ring, 1e9), (), rng)


def test_centralized_uses_exactly_one_capped_site(
    ring: SiteTable, rng: np.random.Generator
) -> None:
    """centralized picks one site (the nearest by default) and carries its power cap."""
    chosen = Centralized(power_cap_ratio=0.5).select(RoundView(ring, 1e9), (), rng)
    assert chosen.site_indices.tolist() == [0]
    assert chosen.power_cap_ratio == 0.5
    strongest = Centralized(ranker=Ranker.HIGHEST_POWER).select(RoundView(ring, 1e9), (), rng)
    assert strongest.site_indices.tolist() == [9]
    assert strongest.power_cap_ratio == 0.25


@pytest.mark.parametrize(
    ("factory", "setting"),
    [
        (lambda: StaticK(k=0), "k"),
        (lambda: RandomK(k=-1), "k"),
        (lambda: FixedRadius(radius_km=-5.0), "radius_km"),
        (lambda: FixedRadius(radius_km=float("nan")), "radius_km"),
        (lambda: Centralized(power_cap_ratio=0.0), "power_cap_ratio"),
        (lambda: Centralized(power_cap_ratio=1.5), "power_cap_ratio"),
    ],
)
def test_policies_check_their_settings(factory: object, setting: str) -> None:
    """Out-of-range settings fail at construction, naming the setting."""
    with pytest.raises(PolicyConfigError, match=setting):
        factory()  # type: ignore[operator]
