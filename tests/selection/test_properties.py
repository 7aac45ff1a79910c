"""Properties every policy keeps, on arbitrary valid inputs (hypothesis)."""

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from powertrip.errors import SelectionError
from powertrip.model.equations import round_time_s
from powertrip.model.sites import SiteTable
from powertrip.selection import PowerTripPolicy, RoundOutcome, RoundView, build_policy


@st.composite
def site_tables(draw: st.DrawFn) -> SiteTable:
    """Valid tables of 1..40 sites, with ties allowed."""
    n = draw(st.integers(1, 40))
    floats = st.floats
    return SiteTable.from_arrays(
        [f"s{i}" for i in range(n)],
        distance_km=draw(st.lists(floats(0, 20_000), min_size=n, max_size=n)),
        bandwidth_bytes_per_s=draw(st.lists(floats(1e6, 1e10), min_size=n, max_size=n)),
        gpus=draw(st.lists(st.integers(1, 16), min_size=n, max_size=n)),
        gpu_power_w=draw(st.lists(floats(100, 1000), min_size=n, max_size=n)),
        power_available_ratio=draw(st.lists(floats(0.01, 1.0), min_size=n, max_size=n)),
    )


outcomes = st.builds(
    RoundOutcome,
    site_count=st.integers(1, 60),
    accuracy=st.floats(0, 1),
    accuracy_gain=st.floats(-0.2, 0.3),
    round_time_s=st.floats(0.1, 1e4),
    compute_time_s=st.floats(0, 1e4),
    communication_time_s=st.floats(0, 1e4),
    mean_power_available_ratio=st.floats(0.01, 1.0),
)

CONFIGS: list[dict[str, Any]] = [
    {"name": "powertrip"},
    {"name": "powertrip", "patience_rounds": 0, "step_sites": 7},
    {"name": "all"},
    {"name": "static-k", "k": 5},
    {"name": "static-k", "k": 3, "ranker": "random"},
    {"name": "random-k", "k": 4},
    {"name": "fixed-radius", "radius_km": 5000},
    {"name": "centralized"},
]


@settings(max_examples=60, deadline=None)
@given(
    sites=site_tables(),
    history=st.lists(outcomes, max_size=6),
    config=st.sampled_from(CONFIGS),
    seed=st.integers(0, 2**32 - 1),
    size_bytes=st.floats(1e6, 1e10),
)
def test_selection_is_a_nonempty_subset_without_duplicates(
    sites: SiteTable,
    history: list[RoundOutcome],
    config: dict[str, Any],
    seed: int,
    size_bytes: float,
) -> None:
    """Every policy returns distinct valid indices, at least one, and the same ones per seed."""
    policy = build_policy(config)
    view = RoundView(sites, size_bytes)
    try:
        chosen = policy.select(view, history, np.random.default_rng(seed))
    except SelectionError:
        assert config["name"] == "fixed-radius"
        assert sites.distance_km.min() > config["radius_km"]
        return
    indices = chosen.site_indices.tolist()
    assert 1 <= len(indices) <= len(sites)
    assert len(set(indices)) == len(indices)
    assert all(0 <= i < len(sites) for i in indices)
    again = policy.select(view, history, np.random.default_rng(seed))
    assert again.site_indices.tolist() == indices


@settings(max_examples=60, deadline=None)
@given(sites=site_tables(), history=st.lists(outcomes, min_size=1, max_size=6))
def test_dynamic_count_never_leaves_one_to_n(sites: SiteTable, history: list[RoundOutcome]) -> None:
    """The dynamic policy's count stays in [1, N] and moves at most one step per round."""
    policy = PowerTripPolicy(step_sites=3)
    decision = policy.decide(RoundView(sites, 1.5e9), history, np.random.default_rng(0))
    assert 1 <= decision.site_count <= len(sites)
    previous = min(history[-1].site_count, len(sites))
    assert abs(decision.site_count - previous) <= 3


@given(
    compute=st.lists(st.floats(0, 1e3), min_size=1, max_size=20),
    comm=st.lists(st.floats(0, 1e3), min_size=20, max_size=20),
    which=st.integers(0, 19),
    extra=st.floats(0, 1e3),
)
def test_round_time_is_monotone_in_the_slowest_link(
    compute: list[float], comm: list[float], which: int, extra: float
) -> None:
    """Slowing any selected link never makes the round faster, and the round is never faster
    than its slowest link."""
    links = np.asarray(comm[: len(compute)])
    before = round_time_s(compute, links)
    slower = links.copy()
    slower[which % len(compute)] += extra
    assert round_time_s(compute, slower) >= before
    assert before >= links.max()
