"""Render a policy's view of the candidates as a rich table: the Eq.8 parts of every score and
which sites the policy picks, so an operator can see why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.table import Table

from powertrip.model.units import format_size_bytes
from powertrip.selection import RoundView, Selection, build_policy, rank
from powertrip.selection.ranking import Ranker


@dataclass(frozen=True)
class RankingReport:
    """A policy's selection for one round, with the view it was made from."""

    policy_name: str
    view: RoundView
    selection: Selection


def select_once(view: RoundView, policy_config: Mapping[str, Any], seed: int) -> RankingReport:
    """Run one selection of a policy (no history: the first round) on a view."""
    policy = build_policy(policy_config)
    selection = policy.select(view, (), np.random.default_rng(seed))
    return RankingReport(policy.name, view, selection)


def ranking_table(report: RankingReport, limit: int) -> Table:
    """Candidates in Eq.8 order, with each score's parts and the policy's picks."""
    view, selection = report.view, report.selection
    sites, score = view.sites, view.power_cost
    pick = {int(index): position + 1 for position, index in enumerate(selection.site_indices)}
    order = rank(Ranker.POWER_TO_COST, view, np.random.default_rng(0))
    chosen_comm = view.communication_time_s[selection.site_indices]
    table = Table(
        title=f"policy {report.policy_name!r}: {len(selection)} of {len(sites)} sites selected",
        caption=(
            f"update {format_size_bytes(view.update_size_bytes)}: alpha={score.alpha:.3f} (power), "
            f"beta={score.beta:.3f} (cost); slowest selected link (Eq.4) "
            f"{float(chosen_comm.max()):.3f} s"
            + (
                f"; power capped at {selection.power_cap_ratio:.0%}"
                if selection.power_cap_ratio is not None
                else ""
            )
        ),
    )
    for column in ("rank", "site", "distance km", "bandwidth MB/s", "power", "power kW"):
        table.add_column(column, justify="left" if column == "site" else "right")
    for column in ("comm s", "P~", "C~", "score", "pick"):
        table.add_column(column, justify="right")
    for position, index in enumerate(order[:limit]):
        i = int(index)
        picked = pick.get(i)
        table.add_row(
            str(position + 1),
            sites.site_ids[i],
            f"{sites.distance_km[i]:,.0f}",
            f"{sites.bandwidth_bytes_per_s[i] / 1e6:,.1f}",
            f"{sites.power_available_ratio[i]:.0%}",
            f"{sites.power_w[i] / 1e3:,.2f}",
            f"{view.communication_time_s[i]:.3f}",
            f"{score.power_norm[i]:.3f}",
            f"{score.cost_norm[i]:.3f}",
            f"{score.score[i]:+.3f}",
            f"#{picked}" if picked else "",
            style="bold green" if picked else None,
        )
    if len(order) > limit:
        table.add_row("…", f"{len(order) - limit} more sites", *[""] * 9)
    return table
