"""PowerTrip's dynamic policy (Algorithm 1): start small, grow while efficiency rises."""

import math

import numpy as np
import pytest

from powertrip.errors import PolicyConfigError
from powertrip.model.sites import SiteTable
from powertrip.selection import PowerTripPolicy, RoundOutcome, RoundView, should_stop


def outcome(
    site_count: int,
    *,
    gain: float = 0.1,
    round_time: float = 12.0,
    compute: float = 10.0,
    mean_power: float = 0.75,
    accuracy: float = 0.5,
) -> RoundOutcome:
    """A finished round with the fields the policy reads."""
    return RoundOutcome(
        site_count=site_count,
        accuracy=accuracy,
        accuracy_gain=gain,
        round_time_s=round_time,
        compute_time_s=compute,
        communication_time_s=round_time - compute,
        mean_power_available_ratio=mean_power,
    )


def three_sites(link_s: list[float]) -> RoundView:
    """Power 100% / 50% / 25%, links of the given seconds for a 1 GB update, ranked 0, 1, 2."""
    sites = SiteTable.from_arrays(
        ["a", "b", "c"],
        distance_km=0.0,
        bandwidth_bytes_per_s=[1e9 / t for t in link_s],
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=[1.0, 0.5, 0.25],
    )
    return RoundView(sites, 1e9)


def uniform_sites(n: int) -> RoundView:
    """n identical sites: the estimated round time does not depend on the count."""
    sites = SiteTable.from_arrays(
        [f"s{i}" for i in range(n)],
        distance_km=0.0,
        bandwidth_bytes_per_s=1e9,
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=0.6,
    )
    return RoundView(sites, 1e9)


def test_first_round_uses_k0_best_ranked(rng: np.random.Generator) -> None:
    """Round 1 takes ceil(0.1 N) sites, or `initial_sites` when set."""
    assert len(PowerTripPolicy().select(uniform_sites(95), (), rng)) == 10
    assert len(PowerTripPolicy(initial_sites=3).select(uniform_sites(95), (), rng)) == 3
    assert len(PowerTripPolicy(initial_sites=500).select(uniform_sites(95), (), rng)) == 95


def test_estimates_match_algorithm_1_by_hand(rng: np.random.Generator) -> None:
    """C = 10 s x 0.75 = 7.5; T(k') = C / mean(a) + max link; dA(k') = 0.1 log(1+k')/log 3."""
    decision = PowerTripPolicy().decide(three_sites([1.0, 2.0, 4.0]), [outcome(2)], rng)
    by_count = {e.site_count: e for e in decision.estimates}
    assert by_count[1].estimated_round_time_s == pytest.approx(7.5 / 1.0 + 1.0)
    assert by_count[2].estimated_round_time_s == pytest.approx(7.5 / 0.75 + 2.0)
    assert by_count[3].estimated_round_time_s == pytest.approx(7.5 / (1.75 / 3) + 4.0)
    assert by_count[1].projected_gain == pytest.approx(0.1 * math.log(2) / math.log(3))
    assert by_count[2].projected_gain == pytest.approx(0.1)
    assert by_count[3].projected_gain == pytest.approx(0.1 * math.log(4) / math.log(3))
    # Efficiencies 0.00742, 0.00833, 0.00749: two sites is best, so the count holds.
    assert decision.site_count == 2
    assert decision.selected_indices.tolist() == [0, 1]


def test_grows_when_projected_efficiency_rises(rng: np.random.Generator) -> None:
    """With no time penalty for more sites, the count grows by the full step."""
    policy = PowerTripPolicy(step_sites=4)
    assert len(policy.select(uniform_sites(100), [outcome(10)], rng)) == 14
    assert len(policy.select(uniform_sites(100), [outcome(10), outcome(14)], rng)) == 18


def test_gain_trend_is_normalised_by_worker_count(rng: np.random.Generator) -> None:
    """Rounds with different counts contribute gain / log(1 + k), the DESIGN's normalisation."""
    history = [outcome(2, gain=0.2), outcome(3, gain=0.1)]
    decision = PowerTripPolicy(window_rounds=2).decide(three_sites([1, 2, 4]), history, rng)
    expected_per_log = (0.2 / math.log(3) + 0.1 / math.log(4)) / 2
    assert decision.estimates[0].site_count == 1
    assert decision.estimates[0].projected_gain == pytest.approx(expected_per_log * math.log(2))


def test_does_not_shrink_before_patience(rng: np.random.Generator) -> None:
    """One site projects best, but shrinking waits for `patience` stalled rounds."""
    view = three_sites([1.0, 6.0, 8.0])  # efficiencies 0.00742, 0.00625, 0.00605
    policy = PowerTripPolicy(patience_rounds=2)
    assert policy.decide(view, [outcome(2)], rng).site_count == 2
    improving = [outcome(2, gain=0.05), outcome(2, gain=0.08), outcome(2, gain=0.1)]
    held = policy.decide(view, improving, rng)
    assert held.site_count == 2
    assert "patience" in held.reason
    one_stall = [outcome(2, gain=0.1), outcome(2, gain=0.12), outcome(2, gain=0.1)]
    assert policy.decide(view, one_stall, rng).site_count == 2


def test_shrinks_once_patience_runs_out(rng: np.random.Generator) -> None:
    """After `patience` rounds without better realised efficiency, the smaller count wins."""
    view = three_sites([1.0, 6.0, 8.0])
    stalled = [outcome(2, gain=0.12), outcome(2, gain=0.11), outcome(2, gain=0.1)]
    assert PowerTripPolicy(patience_rounds=2).decide(view, stalled, rng).site_count == 1
    assert PowerTripPolicy(patience_rounds=0).decide(view, [outcome(2)], rng).site_count == 1


def test_holds_without_a_positive_accuracy_trend(rng: np.random.Generator) -> None:
    """Accuracy that fell gives no evidence for any move: the count holds."""
    decision = PowerTripPolicy().decide(uniform_sites(50), [outcome(10, gain=-0.01)], rng)
    assert decision.site_count == 10
    assert "no positive" in decision.reason


def test_stays_within_the_candidates_when_sites_drop_out(rng: np.random.Generator) -> None:
    """A previous count above today's N is brought back inside [1, N]."""
    assert len(PowerTripPolicy().select(three_sites([1, 1, 1]), [outcome(40)], rng)) == 3


def test_reranks_with_current_power(rng: np.random.Generator) -> None:
    """The same count picks other sites when power moves (re-rank every round)."""
    view = uniform_sites(4)
    before = view.sites.with_power([1.0, 0.2, 0.2, 0.2])
    after = view.sites.with_power([0.2, 0.2, 0.2, 1.0])
    policy = PowerTripPolicy(initial_sites=1)
    assert policy.select(RoundView(before, 1e9), (), rng).site_indices.tolist() == [0]
    assert policy.select(RoundView(after, 1e9), (), rng).site_indices.tolist() == [3]


@pytest.mark.parametrize(
    "settings",
    [
        {"initial_sites": 0},
        {"initial_fraction": 0.0},
        {"initial_fraction": 1.5},
        {"window_rounds": 0},
        {"step_sites": 0},
        {"patience_rounds": -1},
    ],
)
def test_settings_are_checked(settings: dict[str, float]) -> None:
    """Each setting out of range is an error naming it."""
    with pytest.raises(PolicyConfigError, match=next(iter(settings))):
        PowerTripPolicy(**settings)  # type: ignore[arg-type]


def test_stop_rule() -> None:
    """Stop at the target accuracy or at the round budget, whichever comes first."""
    assert not should_stop([], 0.9, 10)
    assert should_stop([outcome(3, accuracy=0.91)], 0.9, 10)
    assert not should_stop([outcome(3, accuracy=0.5)], 0.9, 10)
    assert should_stop([outcome(3, accuracy=0.5)] * 10, 0.9, 10)
