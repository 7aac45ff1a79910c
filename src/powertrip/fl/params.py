"""Model parameters as named numpy arrays, and the checks every update passes before use.

A site's update touches the global model only after `check_update`: the same tensor names,
shapes and dtypes as the global model, and only finite values. Anything else is rejected with
an error that names the site and the tensor, and the global model stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from powertrip.errors import PowerTripError

Params = Mapping[str, NDArray[np.floating]]


class InvalidUpdateError(PowerTripError, ValueError):
    """A site's update does not fit the global model or holds non-finite values."""


def check_update(reference: Params, update: Params, site_id: str) -> None:
    """Raise `InvalidUpdateError` unless `update` matches `reference` tensor for tensor."""
    missing = sorted(set(reference) - set(update))
    unexpected = sorted(set(update) - set(reference))
    if missing or unexpected:
        raise InvalidUpdateError(
            f"update from site {site_id!r}: tensor names differ from the global model "
            f"(missing {missing}, unexpected {unexpected})"
        )
    for name, expected in reference.items():
        got = update[name]
        if got.shape != expected.shape:
            raise InvalidUpdateError(
                f"update from site {site_id!r}: tensor {name!r} has shape {got.shape}, "
                f"the global model has {expected.shape}"
            )
        if got.dtype != expected.dtype:
            raise InvalidUpdateError(
                f"update from site {site_id!r}: tensor {name!r} has dtype {got.dtype}, "
                f"the global model has {expected.dtype}"
            )
        if not _all_finite(got):
            bad = int(np.size(got) - np.count_nonzero(np.isfinite(got)))
            raise InvalidUpdateError(
                f"update from site {site_id!r}: tensor {name!r} holds {bad} non-finite values"
            )


_CHECK_BLOCK_ELEMENTS = 2**20


def _all_finite(array: NDArray[np.generic]) -> bool:
    """Whether every value is finite, checked in blocks (no array-sized temporary)."""
    flat = np.asarray(array).reshape(-1)
    return all(
        bool(np.isfinite(flat[start : start + _CHECK_BLOCK_ELEMENTS]).all())
        for start in range(0, flat.size, _CHECK_BLOCK_ELEMENTS)
    )
