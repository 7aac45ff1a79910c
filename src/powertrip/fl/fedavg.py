"""Eq.1/2 FedAvg: w = sum_i (n_i / sum_j n_j) w_i over the sites that reported.

`StreamingFedAvg` folds one update at a time into a running sum per tensor, so memory is
O(model) however many sites report, and updates can be folded as they arrive. The sum is
float64 by default; the aggregator service sums in float32 to keep its memory at one model
(sums of up to thousands of float32 updates lose about 1e-6 relative, below SGD's own noise).
Updates are folded in blocks, so no temporary larger than a block is ever made.
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


FOLD_BLOCK_ELEMENTS = 2**18
"""Elements folded at a time: big enough to amortise numpy's per-call cost, small enough that
the weighted block stays in cache and adds nothing measurable to peak memory."""


class StreamingFedAvg:
    """Fold updates one by one; `result()` gives the weighted mean in the reference dtypes."""

    def __init__(self, reference: Params, accumulate_dtype: type[np.floating] = np.float64) -> None:
        self._dtypes = {name: array.dtype for name, array in reference.items()}
        self._sums = {
            name: np.zeros(array.shape, accumulate_dtype) for name, array in reference.items()
        }
        self._block = np.empty(FOLD_BLOCK_ELEMENTS, accumulate_dtype)
        self._total_weight = 0.0
        self._result: dict[str, NDArray[np.floating]] | None = None
        self.count = 0

    def add(self, update: Params, num_samples: float) -> None:
        """Add one (already checked) update with its local sample count n_i."""
        if self._result is not None:
            raise InvalidValueError("this FedAvg has already produced its result")
        if not (np.isfinite(num_samples) and num_samples > 0):
            raise InvalidValueError(f"sample count must be finite and > 0, got {num_samples}")
        for name, total in self._sums.items():
            flat_total = total.reshape(-1)
            flat_update = np.asarray(update[name]).reshape(-1)
            for start in range(0, flat_total.size, FOLD_BLOCK_ELEMENTS):
                end = min(start + FOLD_BLOCK_ELEMENTS, flat_total.size)
                block = self._block[: end - start]
                np.multiply(flat_update[start:end], num_samples, out=block, casting="unsafe")
                np.add(flat_total[start:end], block, out=flat_total[start:end])
        self._total_weight += num_samples
        self.count += 1

    def result(self) -> dict[str, NDArray[np.floating]]:
        """The weighted mean of everything added; at least one update is needed.

        The sums are scaled in place (no second model-sized buffer), so this ends the fold:
        later calls return the same mean and `add` is refused."""
        if self.count == 0:
            raise InvalidValueError("FedAvg needs at least one update")
        if self._result is None:
            scale = 1.0 / self._total_weight
            for name in self._sums:
                self._sums[name] *= scale
            self._result = {
                name: total.astype(self._dtypes[name], copy=False)
                for name, total in self._sums.items()
            }
        return self._result
