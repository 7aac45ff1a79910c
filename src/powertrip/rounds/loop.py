"""The round loop: select -> dispatch -> collect -> check -> aggregate -> evaluate -> feed back.

One loop serves the simulator and the aggregator service; they differ only in the
`ProfileSource`, `SiteClient`, `Evaluator` and `Clock` they pass in. The loop holds no hidden
state: a `JobState` goes in and a new one comes out of every round, so a job can be stored
after each round and resumed from it. The policy's randomness for round r is drawn from
`default_rng([seed, r])`, so a resumed job draws what the uninterrupted one would have.

Round time is what the clock says elapsed between selection and aggregation (in simulation the
simulated sites advance the clock by the round's Eq.7 time); evaluation is not part of it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from powertrip.errors import InvalidValueError
from powertrip.fl.fedavg import StreamingFedAvg
from powertrip.fl.params import InvalidUpdateError, Params, check_update
from powertrip.rounds.clock import Clock
from powertrip.rounds.protocols import (
    Evaluator,
    ProfileSource,
    SiteClient,
    SiteReport,
    SiteStatus,
    TrainRequest,
)
from powertrip.selection import Policy, RoundOutcome, RoundView, should_stop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSettings:
    """What a job is asked to do, independent of where it runs."""

    update_size_bytes: float
    target_accuracy: float
    max_rounds: int
    transfers_per_round: int = 1
    round_deadline_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.target_accuracy <= 1:
            raise InvalidValueError(
                f"target_accuracy must be in (0, 1], got {self.target_accuracy}"
            )
        if self.max_rounds < 1:
            raise InvalidValueError(f"max_rounds must be >= 1, got {self.max_rounds}")
        if self.round_deadline_s is not None and not self.round_deadline_s > 0:
            raise InvalidValueError(f"round_deadline_s must be > 0, got {self.round_deadline_s}")


@dataclass(frozen=True)
class RoundRecord:
    """Everything recorded about one finished round (1-based `round_index`)."""

    round_index: int
    start_time_s: float
    end_time_s: float
    candidate_count: int
    selected_site_ids: tuple[str, ...]
    completed_site_ids: tuple[str, ...]
    dropped: tuple[tuple[str, str], ...]
    compute_time_s: float
    communication_time_s: float
    accuracy: float
    accuracy_gain: float
    mean_power_available_ratio: float
    power_cap_ratio: float | None = None

    @property
    def round_time_s(self) -> float:
        """Wall (or simulated) time of the round, selection to aggregation."""
        return self.end_time_s - self.start_time_s

    def shifted(self, offset_s: float) -> RoundRecord:
        """The same round on a clock whose origin is `offset_s` earlier (times + offset_s)."""
        return dataclasses.replace(
            self, start_time_s=self.start_time_s + offset_s, end_time_s=self.end_time_s + offset_s
        )

    @cached_property
    def outcome(self) -> RoundOutcome:
        """What the policy learns from this round (built once per record)."""
        return RoundOutcome(
            site_count=len(self.selected_site_ids),
            accuracy=self.accuracy,
            accuracy_gain=self.accuracy_gain,
            # A round in which every site failed at once still took some time to find out.
            round_time_s=max(self.round_time_s, 1e-9),
            compute_time_s=self.compute_time_s,
            communication_time_s=self.communication_time_s,
            mean_power_available_ratio=self.mean_power_available_ratio,
        )


@dataclass(frozen=True)
class JobState:
    """A job between rounds: the global model and the rounds so far."""

    global_params: Params
    initial_accuracy: float
    start_time_s: float
    records: tuple[RoundRecord, ...] = ()

    @property
    def accuracy(self) -> float:
        """Accuracy of the current global model."""
        return self.records[-1].accuracy if self.records else self.initial_accuracy

    def time_to_accuracy_s(self, target: float) -> float | None:
        """Time from the job's start to the end of the first round at or above `target`."""
        for record in self.records:
            if record.accuracy >= target:
                return record.end_time_s - self.start_time_s
        return None


class RoundLoop:
    """Runs rounds of one job; see the module docstring for the order of steps."""

    def __init__(
        self,
        policy: Policy,
        profiles: ProfileSource,
        sites: SiteClient,
        evaluator: Evaluator,
        clock: Clock,
        settings: JobSettings,
        accumulate_dtype: type[np.floating] = np.float64,
    ) -> None:
        self.accumulate_dtype = accumulate_dtype
        self.policy = policy
        self.profiles = profiles
        self.sites = sites
        self.evaluator = evaluator
        self.clock = clock
        self.settings = settings

    def start(self, initial_params: Params) -> JobState:
        """A new job at the current time, with the initial model evaluated."""
        return JobState(
            global_params=dict(initial_params),
            initial_accuracy=self.evaluator.accuracy(initial_params),
            start_time_s=self.clock.now(),
        )

    def finished(self, state: JobState) -> bool:
        """Algorithm 1's stop rule on this job's history."""
        outcomes = [r.outcome for r in state.records]
        return should_stop(outcomes, self.settings.target_accuracy, self.settings.max_rounds)

    def run(self, state: JobState, on_round: Callable[[JobState], None] | None = None) -> JobState:
        """Run rounds until the target accuracy or the round budget; `on_round` sees each."""
        while not self.finished(state):
            state = self.run_round(state)
            if on_round is not None:
                on_round(state)
        return state

    def run_round(self, state: JobState) -> JobState:
        """One round; the global model changes only through checked updates."""
        round_index = len(state.records) + 1
        start_s = self.clock.now()
        candidates = self.profiles.sites_at(start_s)
        view = RoundView(
            candidates, self.settings.update_size_bytes, self.settings.transfers_per_round
        )
        rng = np.random.default_rng([self.settings.seed, round_index])
        selection = self.policy.select(view, [r.outcome for r in state.records], rng)
        selected_ids = candidates.ids_at(selection.site_indices)
        power = candidates.power_available_ratio[selection.site_indices]
        if selection.power_cap_ratio is not None:
            power = np.minimum(power, selection.power_cap_ratio)

        fold = RoundFold(state.global_params, selected_ids, self.accumulate_dtype)
        self.sites.train(
            TrainRequest(
                round_index=round_index,
                site_ids=selected_ids,
                global_params=state.global_params,
                deadline_s=self.settings.round_deadline_s,
                power_cap_ratio=selection.power_cap_ratio,
                centralized=selection.centralized,
            ),
            fold.deliver,
        )
        accepted, dropped = fold.close()
        end_s = self.clock.now()
        new_params = fold.average.result() if accepted else state.global_params
        accuracy = self.evaluator.accuracy(new_params) if accepted else state.accuracy
        record = RoundRecord(
            round_index=round_index,
            start_time_s=start_s,
            end_time_s=end_s,
            candidate_count=len(candidates),
            selected_site_ids=selected_ids,
            completed_site_ids=tuple(r.site_id for r in accepted),
            dropped=tuple(dropped),
            compute_time_s=max((r.compute_time_s for r in accepted), default=0.0),
            communication_time_s=max((r.communication_time_s for r in accepted), default=0.0),
            accuracy=accuracy,
            accuracy_gain=accuracy - state.accuracy,
            mean_power_available_ratio=float(np.mean(power)),
            power_cap_ratio=selection.power_cap_ratio,
        )
        records = (*state.records, record)
        return dataclasses.replace(state, global_params=new_params, records=records)


class RoundFold:
    """One round's aggregation: checks each report as it is delivered and folds the good ones.

    Thread-safe: site clients deliver from their own threads. A report for a site that was not
    selected, a second report for a site, and anything delivered after `close` are ignored
    (a site reported LATE at the deadline cannot sneak its update in afterwards). Accepted
    reports are kept without their updates, so memory stays at one running sum.
    """

    def __init__(
        self,
        global_params: Params,
        selected: tuple[str, ...],
        accumulate_dtype: type[np.floating] = np.float64,
    ) -> None:
        self.reference = global_params
        self.selected = frozenset(selected)
        self.order = selected
        self.average = StreamingFedAvg(global_params, accumulate_dtype)
        self._accepted: list[SiteReport] = []
        self._dropped: list[tuple[str, str]] = []
        self._seen: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()

    def deliver(self, report: SiteReport) -> None:
        """Check `report` and fold its update into the average, or record why it is dropped."""
        with self._lock:
            if self._closed:
                log.info("ignoring a report from %r after the round closed", report.site_id)
                return
            if report.site_id not in self.selected or report.site_id in self._seen:
                log.warning("ignoring an unrequested or repeated report from %r", report.site_id)
                return
            self._seen.add(report.site_id)
            if report.status is not SiteStatus.OK or report.update is None:
                self._dropped.append((report.site_id, f"{report.status}: {report.message}".strip()))
                return
            try:
                check_update(self.reference, report.update, report.site_id)
                if not (math.isfinite(report.num_samples) and report.num_samples > 0):
                    raise InvalidUpdateError(
                        f"update from site {report.site_id!r}: sample count must be > 0, "
                        f"got {report.num_samples}"
                    )
            except InvalidUpdateError as error:
                log.warning("rejected update: %s", error)
                self._dropped.append((report.site_id, f"{SiteStatus.REJECTED}: {error}"))
                return
            self.average.add(report.update, report.num_samples)
            self._accepted.append(dataclasses.replace(report, update=None))

    def close(self) -> tuple[list[SiteReport], list[tuple[str, str]]]:
        """End the round: the accepted reports (without updates) and the dropped sites with
        their reasons, a site that never reported included."""
        with self._lock:
            self._closed = True
            missing = [(s, "failed: no report") for s in self.order if s not in self._seen]
            return list(self._accepted), [*self._dropped, *missing]
