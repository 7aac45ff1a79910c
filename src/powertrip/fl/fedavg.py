"""Eq.1/2 FedAvg: w = sum_i (n_i / sum_j n_j) w_i over the sites that reported.

`StreamingFedAvg` folds one update at a time into a float64 running sum per tensor, so memory
is O(model) however many sites report, and updates can be folded as they arrive.
`fedavg` is the same weighted mean over a list, for tests and small callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from powertrip.errors import InvalidValueError
from powertrip.fl.params import Params


def fedavg(updates: Iterable[tuple[ArrayLike, float]]) -> NDArray[np.float64]:
    """Weighted mean of (values, samples) pairs: fedavg([([1.0], 1), ([4.0], 3)]) == [3.25]."""
    pairs: Sequence[tuple[ArrayLike, float]] = list(updates)
    if not pairs:
        raise InvalidValueError("FedAvg needs at least one update")
    weights = np.asarray([w for _, w in pairs], dtype=np.float64)
    if (weights <= 0).any() or not np.isfinite(weights).all():
        raise InvalidValueError("FedAvg weights (sample counts) must be finite and > 0")
    stacked = np.stack([np.asarray(v, dtype=np.float64) for v, _ in pairs])
    result: NDArray[np.float64] = np.tensordot(weights / weights.sum(), stacked, axes=1)
    return result


class StreamingFedAvg:
    """Fold updates one by one; `result()` gives the weighted mean in the reference dtypes."""

    def __init__(self, reference: Params) -> None:
        self._dtypes = {name: array.dtype for name, array in reference.items()}
        self._sums = {name: np.zeros(array.shape, np.float64) for name, array in reference.items()}
        self._total_weight = 0.0
        self.count = 0

    def add(self, update: Params, num_samples: float) -> None:
        """Add one (already checked) update with its local sample count n_i."""
        if not (np.isfinite(num_samples) and num_samples > 0):
            raise InvalidValueError(f"sample count must be finite and > 0, got {num_samples}")
        for name, total in self._sums.items():
            np.add(total, num_samples * np.asarray(update[name], dtype=np.float64), out=total)
        self._total_weight += num_samples
        self.count += 1

    def result(self) -> dict[str, NDArray[np.floating]]:
        """The weighted mean of everything added; at least one update is needed."""
        if self.count == 0:
            raise InvalidValueError("FedAvg needs at least one update")
        scale = 1.0 / self._total_weight
        return {
            name: (total * scale).astype(self._dtypes[name]) for name, total in self._sums.items()
        }
