"""The boundaries of the round loop, each a Protocol with a simulated and a real implementation.

- `ProfileSource`: the candidate sites and their current power and links (simulated power
  model, or the profiler service).
- `SiteClient`: trains the global model at the selected sites and returns their reports
  (batched simulated sites, or gRPC site workers).
- `Evaluator`: accuracy of a model on the held-out set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from powertrip.fl.params import Params
from powertrip.model.sites import SiteTable


class SiteStatus(StrEnum):
    """How a site's part of a round ended."""

    OK = "ok"
    FAILED = "failed"
    LATE = "late"
    REJECTED = "rejected"


@dataclass(frozen=True)
class TrainRequest:
    """One round's work for the selected sites.

    `power_cap_ratio` caps each site's power availability and `centralized` marks the
    centralized baseline (a simulated site then trains on all the data);
    `deadline_s` bounds how long the round waits for any site (None: wait for all).
    """

    round_index: int
    site_ids: tuple[str, ...]
    global_params: Params
    deadline_s: float | None = None
    power_cap_ratio: float | None = None
    centralized: bool = False


@dataclass(frozen=True)
class SiteReport:
    """One site's result: its update and sample count when `status` is OK."""

    site_id: str
    status: SiteStatus
    num_samples: int = 0
    update: Params | None = None
    compute_time_s: float = 0.0
    communication_time_s: float = 0.0
    power_available_ratio: float = 1.0
    message: str = ""


class ProfileSource(Protocol):
    """The candidates of a round: every site that can take part now, with its profile."""

    def sites_at(self, time_s: float) -> SiteTable:
        """Candidate sites at `time_s` (sites without power or unhealthy are left out)."""
        ...


Deliver = Callable[[SiteReport], None]
"""Where a `SiteClient` hands each report as soon as it has it (any thread, any order)."""


class SiteClient(Protocol):
    """Runs a round's local training at the selected sites."""

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Hand one report per requested site to `deliver` as each arrives, and return once
        every site has reported or the round's deadline has passed (a site still running
        then is delivered LATE). Updates are folded on delivery, so a client that lets go of
        each update after delivering it keeps the round's memory at O(model)."""
        ...


class Evaluator(Protocol):
    """Scores a model on held-out data."""

    def accuracy(self, params: Params) -> float:
        """Fraction of held-out samples classified correctly."""
        ...
