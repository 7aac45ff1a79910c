"""Building policies by name from plain mappings, with errors that say what is valid."""

from typing import Any

import pytest

from powertrip.errors import PolicyConfigError
from powertrip.selection import (
    POLICY_NAMES,
    Centralized,
    FixedRadius,
    PowerTripPolicy,
    StaticK,
    build_policy,
)
from powertrip.selection.ranking import Ranker


def test_builds_each_policy_with_settings() -> None:
    """Names map to policies; settings are coerced to their declared types."""
    assert build_policy({"name": "powertrip"}) == PowerTripPolicy()
    assert build_policy({"name": "static-k", "k": "70", "ranker": "highest-power"}) == StaticK(
        k=70, ranker=Ranker.HIGHEST_POWER
    )
    assert build_policy({"name": "fixed-radius", "radius_km": 2000}) == FixedRadius(2000.0)
    assert build_policy({"name": "centralized", "power_cap_ratio": "0.5"}) == Centralized(0.5)
    assert build_policy({"name": "powertrip", "initial_sites": "null"}) == PowerTripPolicy()
    assert set(POLICY_NAMES) == {
        "powertrip",
        "all",
        "static-k",
        "random-k",
        "fixed-radius",
        "centralized",
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"name": "fastest"}, "unknown policy 'fastest'.*valid policies: powertrip, all"),
        ({"name": "static-optimal"}, "sweep over static-k"),
        ({}, "needs a 'name'"),
        ({"name": "static-k"}, "needs setting\\(s\\): k"),
        ({"name": "static-k", "k": 5, "kk": 1}, "no setting 'kk'; valid: k, ranker"),
        ({"name": "static-k", "k": "seventy"}, "setting 'k' must be an int"),
        ({"name": "static-k", "k": 2.5}, "setting 'k' must be an int"),
        ({"name": "static-k", "k": True}, "setting 'k' must be an int"),
        ({"name": "static-k", "k": 5, "ranker": "fastest"}, "one of lowest-latency, highest"),
        ({"name": "static-k", "k": 0}, "k must be >= 1, got 0"),
        ({"name": "powertrip", "patience_rounds": -2}, "patience_rounds must be >= 0"),
        ({"name": "all", "k": 3}, "no setting 'k'; valid: \\(none\\)"),
    ],
)
def test_bad_configs_name_what_is_wrong(config: dict[str, Any], message: str) -> None:
    """Unknown names, unknown or mistyped settings and out-of-range values are clear errors."""
    with pytest.raises(PolicyConfigError, match=message):
        build_policy(config)


def test_non_mapping_is_rejected() -> None:
    """A policy must be a mapping."""
    with pytest.raises(PolicyConfigError, match="mapping"):
        build_policy(["static-k"])  # type: ignore[arg-type]
