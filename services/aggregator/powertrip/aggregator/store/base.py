"""What the aggregator keeps about jobs: the `JobStore` protocol and its value types.

A store holds every job with its state, its rounds and a checkpoint of its global model. The
rules every store keeps (tests/aggregator/test_store.py runs one suite against each):
- a job's rounds are 1, 2, 3, ... with no gap and no repeat: `save_round` refuses any other;
- a round and the checkpoint saved with it land together or not at all, so after a crash the
  job resumes from a model that matches its last recorded round;
- a finished job (succeeded, failed, cancelled) never changes again.
Round times are stored relative to the job's start.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from powertrip.aggregator.job import JobSpec, Resume
from powertrip.errors import PowerTripError
from powertrip.fl.params import Params
from powertrip.rounds import RoundRecord
from powertrip.transport.payload import Payload


class JobPhase(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """Whether the job is over for good."""
        return self in (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED)


class JobNotFoundError(PowerTripError, LookupError):
    """No job has this id."""


class JobConflictError(PowerTripError, RuntimeError):
    """The job is not in a state that allows this (cancel a finished job, a round out of order)."""


class StoreError(PowerTripError, RuntimeError):
    """The store cannot be opened or read (locked by another aggregator, a bad checkpoint)."""


@dataclass(frozen=True)
class JobRecord:
    """A job as stored: its spec, its state and a summary of its rounds."""

    job_id: str
    spec: JobSpec
    phase: JobPhase
    created_at_s: float
    reason: str = ""
    started_at_s: float | None = None
    finished_at_s: float | None = None
    rounds_completed: int = 0
    initial_accuracy: float | None = None
    accuracy: float | None = None
    selected_site_ids: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    time_to_accuracy_s: float | None = None
    cancel_requested: bool = False
    resumes: int = 0
    checkpoint_round: int = 0


def round_to_dict(record: RoundRecord) -> dict[str, Any]:
    """A round as plain JSON-able values."""
    return {
        "round_index": record.round_index,
        "start_time_s": record.start_time_s,
        "end_time_s": record.end_time_s,
        "candidate_count": record.candidate_count,
        "selected_site_ids": list(record.selected_site_ids),
        "completed_site_ids": list(record.completed_site_ids),
        "dropped": [list(pair) for pair in record.dropped],
        "compute_time_s": record.compute_time_s,
        "communication_time_s": record.communication_time_s,
        "accuracy": record.accuracy,
        "accuracy_gain": record.accuracy_gain,
        "mean_power_available_ratio": record.mean_power_available_ratio,
        "power_cap_ratio": record.power_cap_ratio,
    }


def round_from_dict(values: dict[str, Any]) -> RoundRecord:
    """The inverse of `round_to_dict`."""
    return RoundRecord(
        round_index=int(values["round_index"]),
        start_time_s=float(values["start_time_s"]),
        end_time_s=float(values["end_time_s"]),
        candidate_count=int(values["candidate_count"]),
        selected_site_ids=tuple(values["selected_site_ids"]),
        completed_site_ids=tuple(values["completed_site_ids"]),
        dropped=tuple((str(site), str(why)) for site, why in values["dropped"]),
        compute_time_s=float(values["compute_time_s"]),
        communication_time_s=float(values["communication_time_s"]),
        accuracy=float(values["accuracy"]),
        accuracy_gain=float(values["accuracy_gain"]),
        mean_power_available_ratio=float(values["mean_power_available_ratio"]),
        power_cap_ratio=values["power_cap_ratio"],
    )


class JobStore(Protocol):
    """Durable jobs, rounds and checkpoints (SQLite) or their in-memory fake."""

    def create(self, spec: JobSpec, now_s: float) -> JobRecord:
        """A new queued job with a fresh id."""
        ...

    def get(self, job_id: str) -> JobRecord:
        """The job; `JobNotFoundError` if there is none."""
        ...

    def list_jobs(
        self, phase: JobPhase | None = None, before: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """Jobs newest first, optionally of one phase, starting after the job `before`."""
        ...

    def next_queued(self) -> JobRecord | None:
        """The oldest queued job."""
        ...

    def in_phase(self, phase: JobPhase) -> list[JobRecord]:
        """Every job in `phase`, oldest first."""
        ...

    def counts(self) -> dict[JobPhase, int]:
        """How many jobs are in each phase (every phase present)."""
        ...

    def mark_running(self, job_id: str, now_s: float) -> JobRecord:
        """A queued job starts (or starts again after a crash)."""
        ...

    def set_initial_accuracy(self, job_id: str, accuracy: float) -> None:
        """Accuracy of the job's initial model."""
        ...

    def save_round(self, job_id: str, record: RoundRecord, params: Params | None) -> None:
        """Record the job's next round, with a checkpoint of the global model after it when
        `params` is given; refuses a round that is not exactly the next one."""
        ...

    def request_cancel(self, job_id: str, now_s: float) -> JobRecord:
        """Cancel a queued job now, or flag a running one for its runner to stop."""
        ...

    def finish(self, job_id: str, phase: JobPhase, reason: str, now_s: float) -> JobRecord:
        """End a job for good."""
        ...

    def requeue(self, job_id: str, reason: str) -> JobRecord:
        """Put a running job back in the queue (its aggregator stopped); it will resume."""
        ...

    def rounds(self, job_id: str, after: int = 0, limit: int = 100) -> list[RoundRecord]:
        """The job's rounds with index > `after`, in order, at most `limit`."""
        ...

    def resume_point(self, job_id: str) -> Resume | None:
        """Where the job resumes: its last checkpoint and the rounds up to it (rounds recorded
        after the checkpoint are dropped, to be run again); None to start afresh."""
        ...

    def checkpoint(self, job_id: str) -> tuple[int, Payload] | None:
        """The latest checkpoint as (round, safetensors payload)."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


# The state machine every store applies: pure functions from a job to its next version, so the
# SQLite store and the in-memory one cannot disagree about what is allowed.


def started(job: JobRecord, now_s: float) -> JobRecord:
    """`job` taken from the queue by a runner."""
    if job.phase is not JobPhase.QUEUED:
        raise JobConflictError(f"job {job.job_id} is {job.phase}, not queued")
    return replace(job, phase=JobPhase.RUNNING, reason="", started_at_s=job.started_at_s or now_s)


def after_round(job: JobRecord, record: RoundRecord, checkpointed: bool) -> JobRecord:
    """`job` with `record` as its newest round."""
    if job.phase is not JobPhase.RUNNING:
        raise JobConflictError(f"job {job.job_id} is {job.phase}: it records no rounds")
    if record.round_index != job.rounds_completed + 1:
        raise JobConflictError(
            f"job {job.job_id}: round {record.round_index} does not follow round "
            f"{job.rounds_completed}"
        )
    reached = record.accuracy >= job.spec.target_accuracy
    return replace(
        job,
        rounds_completed=record.round_index,
        accuracy=record.accuracy,
        selected_site_ids=record.selected_site_ids,
        elapsed_s=record.end_time_s,
        time_to_accuracy_s=job.time_to_accuracy_s
        if job.time_to_accuracy_s is not None or not reached
        else record.end_time_s,
        checkpoint_round=record.round_index if checkpointed else job.checkpoint_round,
    )


def summarized(job: JobRecord, records: list[RoundRecord]) -> JobRecord:
    """`job` with its round summary rebuilt from `records` (after a resume drops rounds)."""
    last = records[-1] if records else None
    tta = next((r.end_time_s for r in records if r.accuracy >= job.spec.target_accuracy), None)
    return replace(
        job,
        rounds_completed=len(records),
        accuracy=last.accuracy if last else None,
        selected_site_ids=last.selected_site_ids if last else (),
        elapsed_s=last.end_time_s if last else 0.0,
        time_to_accuracy_s=tta,
    )


def cancelled(job: JobRecord, now_s: float) -> JobRecord:
    """`job` after a user asked to cancel it: at once when queued, flagged when running."""
    if job.phase.finished:
        raise JobConflictError(f"job {job.job_id} is already {job.phase}")
    if job.phase is JobPhase.QUEUED:
        return replace(
            job,
            phase=JobPhase.CANCELLED,
            reason="cancelled before it started",
            finished_at_s=now_s,
            cancel_requested=True,
        )
    return replace(job, cancel_requested=True)


def finished(job: JobRecord, phase: JobPhase, reason: str, now_s: float) -> JobRecord:
    """`job` over for good."""
    if not phase.finished:
        raise ValueError(f"{phase} is not a final phase")
    if job.phase.finished:
        raise JobConflictError(f"job {job.job_id} is already {job.phase}")
    return replace(job, phase=phase, reason=reason, finished_at_s=now_s)


def requeued(job: JobRecord, reason: str) -> JobRecord:
    """A running `job` back in the queue, to resume."""
    if job.phase is not JobPhase.RUNNING:
        raise JobConflictError(f"job {job.job_id} is {job.phase}, not running")
    return replace(job, phase=JobPhase.QUEUED, reason=reason, resumes=job.resumes + 1)
