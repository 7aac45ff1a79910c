"""The paper's equations against values computed by hand."""

import numpy as np
import pytest

from powertrip.errors import InvalidValueError
from powertrip.model.equations import (
    BandwidthLaw,
    communication_time_s,
    compute_time_s,
    power_cost_weights,
    power_limited_gpus,
    power_to_cost_score,
    propagation_delay_s,
    round_communication_time_s,
    round_time_s,
    throughput_samples_per_s,
    training_efficiency,
)


def test_eq3_communication_time_is_propagation_plus_serialisation() -> None:
    """1000 km at 2e8 m/s is 5 ms; 1.5 GB at 1 GB/s is 1.5 s: 1.505 s per transfer."""
    assert propagation_delay_s(1000.0) == pytest.approx(0.005)
    assert communication_time_s(1000.0, 1e9, 1.5e9) == pytest.approx(1.505)
    assert communication_time_s(1000.0, 1e9, 1.5e9, transfers_per_round=2) == pytest.approx(3.01)
    with pytest.raises(InvalidValueError, match="transfers_per_round"):
        communication_time_s(1000.0, 1e9, 1.5e9, transfers_per_round=0)


def test_eq4_round_communication_is_the_slowest_link() -> None:
    """The round waits for its slowest transfer, not the mean or the sum."""
    assert round_communication_time_s([1.505, 0.2, 3.0]) == 3.0


def test_eq6_power_limits_gpus_and_throughput() -> None:
    """2800 W runs four 700 W GPUs, capped by the three the site has; 2799 W runs three."""
    assert power_limited_gpus(2800.0, 8, 700.0) == 4
    assert power_limited_gpus(2800.0, 3, 700.0) == 3
    assert power_limited_gpus(2799.0, 8, 700.0) == 3
    assert power_limited_gpus(0.5 * 8 * 700.0, 8, 700.0) == 4  # exact multiple survives fp
    assert throughput_samples_per_s(2100.0, 8, 700.0, 100.0) == 300.0


def test_compute_time_stretches_with_power() -> None:
    """50% power takes twice as long (paper §4)."""
    np.testing.assert_allclose(compute_time_s(10.0, [1.0, 0.5, 0.1]), [10.0, 20.0, 100.0])


def test_eq7_round_time_is_max_of_per_site_sums() -> None:
    """max(20+1, 10+12) = 22, not max(compute)+max(comm) = 32 nor max(compute) = 20."""
    assert round_time_s([20.0, 10.0], [1.0, 12.0]) == 22.0
    with pytest.raises(InvalidValueError, match="at least one"):
        round_time_s([], [])


def test_eq5_efficiency_is_gain_per_second() -> None:
    """E = dA / T_round; a zero round time is an error."""
    assert training_efficiency(0.05, 20.0) == pytest.approx(0.0025)
    with pytest.raises(InvalidValueError, match="round time"):
        training_efficiency(0.05, 0.0)


@pytest.mark.parametrize(
    ("size_bytes", "alpha", "beta"),
    [(1.5e9, 0.5, 0.5), (1e9, 0.6, 0.4), (2e9, 1.5 / 3.5, 2 / 3.5)],
)
def test_eq8_weights_follow_update_size(size_bytes: float, alpha: float, beta: float) -> None:
    """beta = S / (S + 1.5 GB): 1 GB favours power, 2 GB favours cost, 1.5 GB is even."""
    assert power_cost_weights(size_bytes) == pytest.approx((alpha, beta))


def test_eq8_weights_reject_bad_sizes() -> None:
    """A non-positive or NaN update size is an error naming the field."""
    with pytest.raises(InvalidValueError, match="update_size_bytes"):
        power_cost_weights(0.0)
    with pytest.raises(InvalidValueError, match="reference_size_bytes"):
        power_cost_weights(1e9, float("nan"))


def test_eq8_score_normalises_over_candidates() -> None:
    """P~ and C~ are min-max normalised; score = 0.6 P~ - 0.4 C~."""
    score = power_to_cost_score([1000.0, 3000.0, 2000.0], [1.0, 3.0, 2.0], 0.6, 0.4)
    np.testing.assert_allclose(score.power_norm, [0.0, 1.0, 0.5])
    np.testing.assert_allclose(score.cost_norm, [0.0, 1.0, 0.5])
    np.testing.assert_allclose(score.score, [0.0, 0.2, 0.1])


def test_eq8_equal_values_normalise_to_zero() -> None:
    """A criterion on which all candidates tie does not move the score."""
    score = power_to_cost_score([5.0, 5.0], [1.0, 2.0], 0.5, 0.5)
    np.testing.assert_allclose(score.power_norm, [0.0, 0.0])
    np.testing.assert_allclose(score.score, [0.0, -0.5])


def test_bandwidth_law_is_flat_then_inverse_in_distance() -> None:
    """B(d) = B_max min(1, d0/d): flat to the knee, halved at twice the knee."""
    law = BandwidthLaw(max_bytes_per_s=1e9, knee_km=1000.0)
    np.testing.assert_allclose(
        law.bandwidth_bytes_per_s([0.0, 500.0, 1000.0, 2000.0, 10000.0]),
        [1e9, 1e9, 1e9, 5e8, 1e8],
    )


@pytest.mark.parametrize("field", ["max_bytes_per_s", "knee_km"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_bandwidth_law_rejects_bad_settings(field: str, value: float) -> None:
    """Non-positive or NaN settings of the law are errors naming the setting."""
    with pytest.raises(InvalidValueError, match=field):
        BandwidthLaw(**{field: value})
