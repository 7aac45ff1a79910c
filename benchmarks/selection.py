"""Decision time of one PowerTrip round (re-rank + choose) against numpy.argsort of N floats.

For N = 100, 10,000 and 1,000,000 sites (distances uniform on 100..10,000 miles, bandwidth by
the default law, power U(0.1, 1)), one round is: build the round's view (Eq.3 for every site),
score every site (Eq.8), take the best k + step in order, estimate every candidate count and
choose. The policy is mid-job (k = ceil(0.1 N), three rounds of history), the realistic case.
The reference is `numpy.argsort` of N random float64 in the same run. Last line:
`selection_vs_argsort_1M=<median decision / median argsort>` (goal <= 1.5).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import SiteTable
from powertrip.model.units import KM_PER_MILE
from powertrip.selection import PowerTripPolicy, RoundOutcome, RoundView


def synthetic_sites(n: int, rng: np.random.Generator) -> SiteTable:
    """n sites as in the paper's uniform experiment."""
    distance_km = rng.uniform(100, 10_000, n) * KM_PER_MILE
    return SiteTable.from_arrays(
        [f"site-{i}" for i in range(n)],
        distance_km=distance_km,
        bandwidth_bytes_per_s=BandwidthLaw().bandwidth_bytes_per_s(distance_km),
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=rng.uniform(0.1, 1.0, n),
    )


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    """Median wall time of `repeats` calls after one warm-up call."""
    action()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    """Measure each size and print the ratio at one million sites last."""
    rng = np.random.default_rng(0)
    policy = PowerTripPolicy()
    ratio = math.nan
    for n, repeats in ((100, 200), (10_000, 50), (1_000_000, 9)):
        sites = synthetic_sites(n, rng)
        k = policy.initial_count(n)
        history = [RoundOutcome(k, 0.3 + 0.05 * r, 0.05, 40.0, 30.0, 10.0, 0.6) for r in range(3)]
        keys = rng.random(n)

        def decide(sites: SiteTable = sites, history: list[RoundOutcome] = history) -> object:
            return policy.select(RoundView(sites, 1.5e9), history, np.random.default_rng(1))

        def reference(keys: np.ndarray = keys) -> object:
            return np.argsort(keys)

        decision_s = median_seconds(decide, repeats)
        argsort_s = median_seconds(reference, repeats)
        ratio = decision_s / argsort_s
        print(
            f"N={n:>9,}  k={k:>7,}  decision {decision_s * 1e3:9.3f} ms  "
            f"argsort {argsort_s * 1e3:9.3f} ms  ratio {ratio:6.2f}"
        )
    print(f"selection_vs_argsort_1M={ratio:.3f}")


if __name__ == "__main__":
    main()
