"""What the job API sends back: response bodies, converted from domain records in one place."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.store import JobPhase, JobRecord, round_to_dict
from powertrip.rounds import RoundRecord


class ErrorBody(BaseModel):
    """Every error: what went wrong, in words."""

    detail: str | list[dict[str, Any]]


class JobView(BaseModel):
    """A job: its spec, where it is, and how it is doing."""

    id: str
    state: JobPhase
    reason: str = Field(description="Why the job is in its state (empty while it runs).")
    spec: JobSpec
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    current_round: int = Field(description="Rounds completed and recorded.")
    initial_accuracy: float | None
    accuracy: float | None = Field(description="Held-out accuracy after the last round.")
    selected_sites: list[str] = Field(description="Sites selected in the last round.")
    elapsed_s: float = Field(description="Training time so far (aggregator downtime excluded).")
    time_to_accuracy_s: float | None
    checkpoint_round: int = Field(description="Round of the newest model checkpoint (0: none).")
    cancel_requested: bool
    resumes: int = Field(description="Times the job resumed after its aggregator stopped.")

    @classmethod
    def of(cls, job: JobRecord) -> JobView:
        """The view of a stored job."""
        return cls(
            id=job.job_id,
            state=job.phase,
            reason=job.reason,
            spec=job.spec,
            created_at=_time(job.created_at_s),
            started_at=_time(job.started_at_s),
            finished_at=_time(job.finished_at_s),
            current_round=job.rounds_completed,
            initial_accuracy=job.initial_accuracy,
            accuracy=job.accuracy,
            selected_sites=list(job.selected_site_ids),
            elapsed_s=job.elapsed_s,
            time_to_accuracy_s=job.time_to_accuracy_s,
            checkpoint_round=job.checkpoint_round,
            cancel_requested=job.cancel_requested,
            resumes=job.resumes,
        )


class JobPage(BaseModel):
    """A page of jobs, newest first; pass `next_before` as `before` for the next page."""

    items: list[JobView]
    next_before: str | None


class RoundView(BaseModel):
    """One recorded round; times are seconds from the job's start."""

    round_index: int
    start_time_s: float
    end_time_s: float
    round_time_s: float
    candidate_count: int
    selected_site_ids: list[str]
    completed_site_ids: list[str]
    dropped: list[tuple[str, str]] = Field(description="(site, why) for every site dropped.")
    compute_time_s: float
    communication_time_s: float
    accuracy: float
    accuracy_gain: float
    mean_power_available_ratio: float
    power_cap_ratio: float | None

    @classmethod
    def of(cls, record: RoundRecord) -> RoundView:
        """The view of a stored round."""
        return cls.model_validate({**round_to_dict(record), "round_time_s": record.round_time_s})


class RoundPage(BaseModel):
    """A page of rounds in order; pass `next_after` as `after` for the next page."""

    items: list[RoundView]
    next_after: int | None


class SiteView(BaseModel):
    """A site's latest profile, as the profiler measured it."""

    site_id: str
    address: str
    distance_km: float
    gpus: int
    gpu_power_w: float
    power_available_ratio: float
    power_w: float
    power_limit_w: float
    power_source: str
    energy_j: float
    rtt_s: float
    bandwidth_bytes_per_s: float
    last_seen_unix_s: float
    healthy: bool
    error: str


class Health(BaseModel):
    """The aggregator is up; how many jobs are where."""

    status: str
    running_jobs: int
    queued_jobs: int


def _time(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)
