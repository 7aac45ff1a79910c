"""Sites as records and as a validated struct-of-arrays table.

A `Site` is one datacenter as an operator writes it down. The selection engine works on a
`SiteTable`: the same fields as numpy arrays, so that every equation and every policy is a
handful of vector operations and scales to a million candidates.

Power availability is a fraction in (0, 1] of the site's maximum power (DESIGN §2). A site with
no spare power at all is not a candidate: the caller leaves it out of the table for that round
instead of the engine selecting a site whose compute would never finish.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from powertrip.errors import InvalidSiteError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Site:
    """One candidate datacenter: where it is, how it is connected, what it can power."""

    site_id: str
    distance_km: float
    bandwidth_bytes_per_s: float
    gpus: int
    gpu_power_w: float
    power_available_ratio: float


@dataclass(frozen=True, eq=False)
class SiteTable:
    """N candidate sites as read-only numpy arrays, validated on construction.

    Build it with `SiteTable.from_sites` or `SiteTable.from_arrays`; both convert dtypes and
    raise `InvalidSiteError` naming the field, the site and the offending value.
    """

    site_ids: tuple[str, ...]
    distance_km: FloatArray
    bandwidth_bytes_per_s: FloatArray
    gpus: IntArray
    gpu_power_w: FloatArray
    power_available_ratio: FloatArray

    @classmethod
    def from_arrays(
        cls,
        site_ids: Sequence[str],
        *,
        distance_km: ArrayLike,
        bandwidth_bytes_per_s: ArrayLike,
        gpus: ArrayLike,
        gpu_power_w: ArrayLike,
        power_available_ratio: ArrayLike,
    ) -> SiteTable:
        """Build a table from per-field sequences (scalars broadcast to every site)."""
        n = len(site_ids)
        return cls(
            site_ids=tuple(site_ids),
            distance_km=_float_array("distance_km", distance_km, n),
            bandwidth_bytes_per_s=_float_array("bandwidth_bytes_per_s", bandwidth_bytes_per_s, n),
            gpus=_int_array("gpus", gpus, site_ids),
            gpu_power_w=_float_array("gpu_power_w", gpu_power_w, n),
            power_available_ratio=_float_array("power_available_ratio", power_available_ratio, n),
        )

    @classmethod
    def from_sites(cls, sites: Iterable[Site]) -> SiteTable:
        """Build a table from site records."""
        records = list(sites)
        return cls.from_arrays(
            [s.site_id for s in records],
            distance_km=[s.distance_km for s in records],
            bandwidth_bytes_per_s=[s.bandwidth_bytes_per_s for s in records],
            gpus=[s.gpus for s in records],
            gpu_power_w=[s.gpu_power_w for s in records],
            power_available_ratio=[s.power_available_ratio for s in records],
        )

    def __post_init__(self) -> None:
        if not self.site_ids:
            raise InvalidSiteError("the site list is empty: at least one site is needed")
        n = len(self.site_ids)
        for field in dataclasses.fields(self):
            if field.name == "site_ids":
                continue
            values = getattr(self, field.name)
            if not isinstance(values, np.ndarray) or values.shape != (n,):
                raise InvalidSiteError(
                    f"{field.name} must be an array of {n} values (one per site); "
                    "build tables with SiteTable.from_arrays or SiteTable.from_sites"
                )
            values.setflags(write=False)
        self._check_ids()
        self._require("distance_km", self.distance_km >= 0, "must be finite and >= 0")
        self._require("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s > 0, "must be > 0")
        self._require("gpus", self.gpus >= 1, "must be >= 1")
        self._require("gpu_power_w", self.gpu_power_w > 0, "must be > 0")
        self._require(
            "power_available_ratio",
            (self.power_available_ratio > 0) & (self.power_available_ratio <= 1),
            "must be in (0, 1]",
        )

    def _check_ids(self) -> None:
        seen: dict[str, int] = {}
        for index, site_id in enumerate(self.site_ids):
            if not isinstance(site_id, str) or not site_id.strip():
                raise InvalidSiteError(f"site #{index}: site_id must be a non-empty string")
            first = seen.setdefault(site_id, index)
            if first != index:
                raise InvalidSiteError(
                    f"duplicate site_id {site_id!r}: sites #{first} and #{index} share it"
                )

    def _require(self, field: str, ok: NDArray[np.bool_], requirement: str) -> None:
        # Comparisons with NaN are False, so `ok` also rejects NaN; reject infinities explicitly.
        values = getattr(self, field)
        bad = ~ok | ~np.isfinite(values)
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise InvalidSiteError(
                f"site {self.site_ids[index]!r} (#{index}): {field} {requirement}, "
                f"got {values[index]!r}"
                + (f" ({int(bad.sum())} sites are invalid)" if bad.sum() > 1 else "")
            )

    def __len__(self) -> int:
        return len(self.site_ids)

    @cached_property
    def capacity_w(self) -> FloatArray:
        """Maximum power each site's GPUs can draw: gpus x per-GPU power (computed once)."""
        capacity: FloatArray = self.gpus * self.gpu_power_w
        capacity.setflags(write=False)
        return capacity

    @property
    def power_w(self) -> FloatArray:
        """Power available to each site now: availability x capacity (P_i(t) of Eq.6)."""
        result: FloatArray = self.power_available_ratio * self.capacity_w
        return result

    def site(self, index: int) -> Site:
        """The record of the site at `index`."""
        return Site(
            site_id=self.site_ids[index],
            distance_km=float(self.distance_km[index]),
            bandwidth_bytes_per_s=float(self.bandwidth_bytes_per_s[index]),
            gpus=int(self.gpus[index]),
            gpu_power_w=float(self.gpu_power_w[index]),
            power_available_ratio=float(self.power_available_ratio[index]),
        )

    def ids_at(self, indices: ArrayLike) -> tuple[str, ...]:
        """Site ids at the given table indices, in the given order."""
        return tuple(self.site_ids[int(i)] for i in np.asarray(indices).ravel())

    def take(self, indices: ArrayLike) -> SiteTable:
        """The sites at `indices`, in that order, as a new table."""
        rows = np.asarray(indices, dtype=np.int64)
        return SiteTable.from_arrays(
            self.ids_at(rows),
            distance_km=self.distance_km[rows],
            bandwidth_bytes_per_s=self.bandwidth_bytes_per_s[rows],
            gpus=self.gpus[rows],
            gpu_power_w=self.gpu_power_w[rows],
            power_available_ratio=self.power_available_ratio[rows],
        )

    def with_power(self, power_available_ratio: ArrayLike) -> SiteTable:
        """The same sites with new power availability (one value per site), validated."""
        return dataclasses.replace(
            self,
            power_available_ratio=_float_array(
                "power_available_ratio", power_available_ratio, len(self)
            ),
        )


def _float_array(field: str, values: ArrayLike, n: int) -> FloatArray:
    try:
        array = np.array(np.broadcast_to(np.asarray(values, dtype=np.float64), (n,)))
    except (TypeError, ValueError) as error:
        raise InvalidSiteError(f"{field} must be {n} numbers (one per site): {error}") from None
    return array


def _int_array(field: str, values: ArrayLike, site_ids: Sequence[str]) -> IntArray:
    floats = _float_array(field, values, len(site_ids))
    not_whole = ~np.isfinite(floats) | (floats != np.round(floats))
    if not_whole.any():
        index = int(np.flatnonzero(not_whole)[0])
        raise InvalidSiteError(
            f"site {site_ids[index]!r} (#{index}): {field} must be a whole number, "
            f"got {floats[index]!r}"
        )
    return floats.astype(np.int64)
