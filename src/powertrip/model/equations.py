"""The paper's equations (DESIGN §2), vectorised over sites; numbering follows the paper.

Every function takes and returns plain floats or numpy arrays with units in the names, so the
selection engine, the simulator and the services compute time and power the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from powertrip.errors import InvalidValueError
from powertrip.model.units import FIBRE_SPEED_M_PER_S, KM_PER_MILE

FloatArray = NDArray[np.float64]

REFERENCE_UPDATE_SIZE_BYTES = 1.5e9
"""S_ref of the Eq.8 weights: at this update size power and cost weigh the same."""


def propagation_delay_s(distance_km: ArrayLike) -> FloatArray:
    """One-way propagation delay through fibre: d / c with c = 2.0e8 m/s."""
    return np.asarray(distance_km, dtype=np.float64) * 1000.0 / FIBRE_SPEED_M_PER_S


def communication_time_s(
    distance_km: ArrayLike,
    bandwidth_bytes_per_s: ArrayLike,
    update_size_bytes: float,
    transfers_per_round: int = 1,
) -> FloatArray:
    """Eq.3: T_comm,i = d_i / c + S / B_i for each transfer of the round.

    The paper counts one transfer per round (the update going up); `transfers_per_round=2`
    also counts the broadcast of the global model going down.
    """
    if transfers_per_round < 1:
        raise InvalidValueError(f"transfers_per_round must be >= 1, got {transfers_per_round}")
    one_transfer = propagation_delay_s(distance_km) + update_size_bytes / np.asarray(
        bandwidth_bytes_per_s, dtype=np.float64
    )
    return transfers_per_round * one_transfer


def round_communication_time_s(communication_times_s: ArrayLike) -> float:
    """Eq.4: the round's communication time is that of its slowest selected site."""
    return float(np.max(communication_times_s))


def power_limited_gpus(power_w: ArrayLike, gpus: ArrayLike, gpu_power_w: ArrayLike) -> FloatArray:
    """Eq.6: G_eff,i = min(G_avail,i, floor(P_i / p_gpu)): GPUs the site's power can run.

    A relative tolerance of 1e-9 keeps exact multiples (0.5 x 8 x 700 W) from flooring down.
    """
    ratio = np.asarray(power_w, dtype=np.float64) / np.asarray(gpu_power_w, dtype=np.float64)
    powered = np.floor(ratio * (1 + 1e-9))
    return np.minimum(np.asarray(gpus, dtype=np.float64), powered)


def throughput_samples_per_s(
    power_w: ArrayLike, gpus: ArrayLike, gpu_power_w: ArrayLike, gpu_samples_per_s: float
) -> FloatArray:
    """Eq.6: X_i = G_eff,i x x_gpu, the site's training throughput under its power limit."""
    return power_limited_gpus(power_w, gpus, gpu_power_w) * gpu_samples_per_s


def compute_time_s(base_compute_time_s: ArrayLike, power_available_ratio: ArrayLike) -> FloatArray:
    """Local compute time under a power limit: T_comp,i = T_0,i / a_i (50% power, twice as long)."""
    return np.asarray(base_compute_time_s, dtype=np.float64) / np.asarray(
        power_available_ratio, dtype=np.float64
    )


def round_time_s(compute_times_s: ArrayLike, communication_times_s: ArrayLike) -> float:
    """Eq.7: T_round = max_i (T_comp,i + T_comm,i) over the selected sites."""
    total = np.asarray(compute_times_s, dtype=np.float64) + np.asarray(
        communication_times_s, dtype=np.float64
    )
    if total.size == 0:
        raise InvalidValueError("a round needs at least one selected site")
    return float(np.max(total))


def training_efficiency(accuracy_gain: float, round_time_seconds: float) -> float:
    """Eq.5: E = dA / T_round, accuracy gained per second of the round."""
    if not round_time_seconds > 0:
        raise InvalidValueError(f"round time must be > 0 s, got {round_time_seconds}")
    return accuracy_gain / round_time_seconds


def power_cost_weights(
    update_size_bytes: float, reference_size_bytes: float = REFERENCE_UPDATE_SIZE_BYTES
) -> tuple[float, float]:
    """Eq.8 weights (alpha, beta): beta = S / (S + S_ref) rises with the update size.

    Small updates favour power (alpha > beta), large ones favour low communication cost.
    """
    for name, value in (
        ("update_size_bytes", update_size_bytes),
        ("reference_size_bytes", reference_size_bytes),
    ):
        if not (math.isfinite(value) and value > 0):
            raise InvalidValueError(f"{name} must be finite and > 0, got {value}")
    beta = update_size_bytes / (update_size_bytes + reference_size_bytes)
    return 1.0 - beta, beta


@dataclass(frozen=True)
class PowerCostScore:
    """Eq.8 and its parts, one value per site: score = alpha * P~ - beta * C~."""

    power_norm: FloatArray
    cost_norm: FloatArray
    alpha: float
    beta: float
    score: FloatArray


def normalise_unit_range(values: ArrayLike) -> FloatArray:
    """Min-max normalisation to [0, 1] over the candidates; all-equal values map to 0."""
    array = np.asarray(values, dtype=np.float64)
    low, high = float(array.min()), float(array.max())
    if high == low:
        return np.zeros_like(array)
    normalised = array - low
    normalised *= 1.0 / (high - low)
    return normalised


def power_to_cost_score(
    power_w: ArrayLike, communication_times_s: ArrayLike, alpha: float, beta: float
) -> PowerCostScore:
    """Eq.8: score_i = alpha * P~_i - beta * C~_i with P~ and C~ normalised over candidates."""
    power_norm = normalise_unit_range(power_w)
    cost_norm = normalise_unit_range(communication_times_s)
    score = alpha * power_norm
    score -= beta * cost_norm
    return PowerCostScore(power_norm, cost_norm, alpha, beta, score)


@dataclass(frozen=True)
class BandwidthLaw:
    """Bandwidth vs distance (paper Fig. 5): B(d) = B_max * min(1, d_0 / d).

    Flat up to the knee d_0, then inversely proportional to distance. Defaults: 1 Gbit/s
    (1.25e8 bytes/s) up to 1000 miles, so a 1.5 GB update takes 12 s near the aggregator and
    120 s at 10,000 miles: comparable to compute (T_0 = 120 s at full power), which is what
    makes the time-to-accuracy vs k curve convex (docs/reproduction.md).
    """

    max_bytes_per_s: float = 1.25e8
    knee_km: float = 1000 * KM_PER_MILE

    def __post_init__(self) -> None:
        for name in ("max_bytes_per_s", "knee_km"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidValueError(f"bandwidth law {name} must be finite and > 0, got {value}")

    def bandwidth_bytes_per_s(self, distance_km: ArrayLike) -> FloatArray:
        """Bandwidth of a link of the given length."""
        distance = np.asarray(distance_km, dtype=np.float64)
        beyond = distance > self.knee_km
        ratio = np.divide(self.knee_km, distance, out=np.ones_like(distance), where=beyond)
        return self.max_bytes_per_s * ratio
