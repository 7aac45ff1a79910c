"""A `JobStore` in memory: the fake beside the SQLite store (tests, throwaway runs)."""

from __future__ import annotations

import secrets
import threading
from dataclasses import replace

from powertrip.aggregator.job import JobSpec, Resume
from powertrip.aggregator.store import base
from powertrip.aggregator.store.base import JobNotFoundError, JobPhase, JobRecord
from powertrip.fl.params import Params
from powertrip.rounds import RoundRecord
from powertrip.transport.payload import Payload, encode_params


class MemoryJobStore:
    """Jobs, rounds and checkpoints in dictionaries; lost when the process ends."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}  # insertion order is creation order
        self._rounds: dict[str, list[RoundRecord]] = {}
        self._checkpoints: dict[str, tuple[int, Params]] = {}
        self._lock = threading.Lock()

    def create(self, spec: JobSpec, now_s: float) -> JobRecord:
        """A new queued job with a fresh id."""
        with self._lock:
            job = JobRecord(secrets.token_hex(6), spec, JobPhase.QUEUED, now_s)
            self._jobs[job.job_id] = job
            self._rounds[job.job_id] = []
            return job

    def get(self, job_id: str) -> JobRecord:
        """The job; `JobNotFoundError` if there is none."""
        with self._lock:
            return self._job(job_id)

    def _job(self, job_id: str) -> JobRecord:
        if job_id not in self._jobs:
            raise JobNotFoundError(f"no job {job_id!r}")
        return self._jobs[job_id]

    def list_jobs(
        self, phase: JobPhase | None = None, before: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """Jobs newest first, optionally of one phase, starting after the job `before`."""
        with self._lock:
            jobs = list(reversed(self._jobs.values()))
            if before is not None:
                self._job(before)
                jobs = jobs[[j.job_id for j in jobs].index(before) + 1 :]
            return [j for j in jobs if phase is None or j.phase is phase][:limit]

    def next_queued(self) -> JobRecord | None:
        """The oldest queued job."""
        with self._lock:
            return next((j for j in self._jobs.values() if j.phase is JobPhase.QUEUED), None)

    def in_phase(self, phase: JobPhase) -> list[JobRecord]:
        """Every job in `phase`, oldest first."""
        with self._lock:
            return [j for j in self._jobs.values() if j.phase is phase]

    def counts(self) -> dict[JobPhase, int]:
        """How many jobs are in each phase (every phase present)."""
        with self._lock:
            counts = dict.fromkeys(JobPhase, 0)
            for job in self._jobs.values():
                counts[job.phase] += 1
            return counts

    def mark_running(self, job_id: str, now_s: float) -> JobRecord:
        """A queued job starts (or starts again after a crash)."""
        with self._lock:
            job = self._jobs[job_id] = base.started(self._job(job_id), now_s)
            return job

    def set_initial_accuracy(self, job_id: str, accuracy: float) -> None:
        """Accuracy of the job's initial model."""
        with self._lock:
            job = self._job(job_id)
            self._jobs[job_id] = replace(job, initial_accuracy=accuracy)

    def save_round(self, job_id: str, record: RoundRecord, params: Params | None) -> None:
        """Record the job's next round, with a checkpoint when `params` is given."""
        with self._lock:
            job = base.after_round(self._job(job_id), record, params is not None)
            if params is not None:
                self._checkpoints[job_id] = (
                    record.round_index,
                    {k: v.copy() for k, v in params.items()},
                )
            self._rounds[job_id].append(record)
            self._jobs[job_id] = job

    def request_cancel(self, job_id: str, now_s: float) -> JobRecord:
        """Cancel a queued job now, or flag a running one for its runner to stop."""
        with self._lock:
            job = self._jobs[job_id] = base.cancelled(self._job(job_id), now_s)
            return job

    def finish(self, job_id: str, phase: JobPhase, reason: str, now_s: float) -> JobRecord:
        """End a job for good."""
        with self._lock:
            job = self._jobs[job_id] = base.finished(self._job(job_id), phase, reason, now_s)
            return job

    def requeue(self, job_id: str, reason: str) -> JobRecord:
        """Put a running job back in the queue; it will resume."""
        with self._lock:
            job = self._jobs[job_id] = base.requeued(self._job(job_id), reason)
            return job

    def rounds(self, job_id: str, after: int = 0, limit: int = 100) -> list[RoundRecord]:
        """The job's rounds with index > `after`, in order, at most `limit`."""
        with self._lock:
            self._job(job_id)
            return self._rounds[job_id][max(after, 0) : max(after, 0) + limit]

    def resume_point(self, job_id: str) -> Resume | None:
        """The last checkpoint and the rounds up to it; later rounds are dropped."""
        with self._lock:
            job = self._job(job_id)
            kept = self._rounds[job_id][: job.checkpoint_round]
            self._rounds[job_id] = kept
            self._jobs[job_id] = base.summarized(job, kept)
            if job.checkpoint_round == 0:
                return None
            _, params = self._checkpoints[job_id]
            assert job.initial_accuracy is not None
            return Resume(dict(params), job.initial_accuracy, tuple(kept))

    def checkpoint(self, job_id: str) -> tuple[int, Payload] | None:
        """The latest checkpoint as (round, safetensors payload)."""
        with self._lock:
            self._job(job_id)
            if job_id not in self._checkpoints:
                return None
            round_index, params = self._checkpoints[job_id]
            return round_index, encode_params(params)

    def close(self) -> None:
        """Nothing to release."""
