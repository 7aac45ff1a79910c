"""Site table construction and validation."""

from typing import Any

import numpy as np
import pytest

from powertrip.errors import InvalidSiteError
from powertrip.model.sites import Site, SiteTable

GOOD: dict[str, Any] = {
    "distance_km": [100.0, 2000.0, 9000.0],
    "bandwidth_bytes_per_s": [1e9, 1e9, 2e8],
    "gpus": [8, 8, 16],
    "gpu_power_w": 700.0,
    "power_available_ratio": [0.2, 0.5, 1.0],
}
IDS = ["near", "mid", "far"]


def test_table_derives_capacity_and_power() -> None:
    """Capacity is gpus x per-GPU power; available power is availability x capacity."""
    table = SiteTable.from_arrays(IDS, **GOOD)
    np.testing.assert_allclose(table.capacity_w, [5600.0, 5600.0, 11200.0])
    np.testing.assert_allclose(table.power_w, [1120.0, 2800.0, 11200.0])
    assert table.site(2) == Site("far", 9000.0, 2e8, 16, 700.0, 1.0)
    assert table.ids_at([2, 0]) == ("far", "near")
    assert SiteTable.from_sites([table.site(i) for i in range(3)]).site_ids == tuple(IDS)


def test_table_arrays_are_read_only() -> None:
    """A table cannot be changed in place; with_power makes a new, validated one."""
    table = SiteTable.from_arrays(IDS, **GOOD)
    with pytest.raises(ValueError, match="read-only"):
        table.power_available_ratio[0] = 0.9
    updated = table.with_power([0.3, 0.3, 0.3])
    np.testing.assert_allclose(updated.power_available_ratio, 0.3)
    np.testing.assert_allclose(table.power_available_ratio, [0.2, 0.5, 1.0])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("power_available_ratio", float("nan"), "power_available_ratio must be in \\(0, 1\\]"),
        ("power_available_ratio", -0.1, "power_available_ratio"),
        ("power_available_ratio", 1.2, "power_available_ratio"),
        ("power_available_ratio", 0.0, "power_available_ratio"),
        ("bandwidth_bytes_per_s", 0.0, "bandwidth_bytes_per_s must be > 0"),
        ("bandwidth_bytes_per_s", -5.0, "bandwidth_bytes_per_s"),
        ("bandwidth_bytes_per_s", float("inf"), "bandwidth_bytes_per_s"),
        ("distance_km", -1.0, "distance_km must be finite and >= 0"),
        ("distance_km", float("nan"), "distance_km"),
        ("gpus", 0, "gpus must be >= 1"),
        ("gpus", 2.5, "gpus must be a whole number"),
        ("gpu_power_w", 0.0, "gpu_power_w must be > 0"),
    ],
)
def test_bad_values_name_field_and_site(field: str, value: float, message: str) -> None:
    """A bad value is rejected (never clamped) with the field and the site's id in the error."""
    column = np.broadcast_to(np.asarray(GOOD[field], dtype=np.float64), (3,)).copy()
    column[1] = value
    with pytest.raises(InvalidSiteError, match=message) as caught:
        SiteTable.from_arrays(IDS, **{**GOOD, field: column})
    assert "'mid' (#1)" in str(caught.value)


def test_empty_site_list_is_an_error() -> None:
    """No sites at all is an error, not an empty selection later."""
    with pytest.raises(InvalidSiteError, match="empty"):
        SiteTable.from_sites([])


def test_duplicate_ids_are_an_error() -> None:
    """Two sites with one id are rejected, naming the id and both positions."""
    with pytest.raises(InvalidSiteError, match="duplicate site_id 'near': sites #0 and #2"):
        SiteTable.from_arrays(["near", "mid", "near"], **GOOD)


def test_blank_id_is_an_error() -> None:
    """A site id must be a non-empty string."""
    with pytest.raises(InvalidSiteError, match="site #1: site_id"):
        SiteTable.from_arrays(["near", " ", "far"], **GOOD)


def test_wrong_length_is_an_error() -> None:
    """Per-field arrays must hold one value per site."""
    with pytest.raises(InvalidSiteError, match="distance_km must be 3 numbers"):
        SiteTable.from_arrays(IDS, **{**GOOD, "distance_km": [1.0, 2.0]})
