"""The selection engine: pure, seeded policies that choose each round's sites (DESIGN §3)."""

from powertrip.selection.base import Policy, RoundOutcome, RoundView, Selection
from powertrip.selection.dynamic import PowerTripPolicy, should_stop
from powertrip.selection.policies import AllSites, Centralized, FixedRadius, RandomK, StaticK
from powertrip.selection.ranking import Ranker, rank, ranking_key, top_indices
from powertrip.selection.registry import POLICY_NAMES, build_policy, policy_settings

__all__ = [
    "POLICY_NAMES",
    "AllSites",
    "Centralized",
    "FixedRadius",
    "Policy",
    "PowerTripPolicy",
    "RandomK",
    "Ranker",
    "RoundOutcome",
    "RoundView",
    "Selection",
    "StaticK",
    "build_policy",
    "policy_settings",
    "rank",
    "ranking_key",
    "should_stop",
    "top_indices",
]
