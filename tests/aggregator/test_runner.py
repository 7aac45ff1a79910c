"""The job runner over a scripted execution: states, reasons, concurrency, cancel, resume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.runner import JobRunner
from powertrip.aggregator.store import JobPhase, JobRecord, JobStore, MemoryJobStore, SqliteJobStore
from powertrip.errors import PowerTripError
from powertrip.fl.params import Params
from powertrip.rounds import RoundRecord
from scripted_jobs import ScriptedExecution, wait_for


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    opened: JobStore = MemoryJobStore() if request.param == "memory" else SqliteJobStore(tmp_path)
    yield opened
    opened.close()


def started(
    store: JobStore,
    execution: ScriptedExecution,
    max_concurrent_jobs: int = 1,
    checkpoint_every: int = 1,
) -> JobRunner:
    runner = JobRunner(store, execution, max_concurrent_jobs, checkpoint_every)
    runner.start()
    return runner


def ended(store: JobStore, job_id: str) -> JobRecord:
    wait_for(lambda: store.get(job_id).phase.finished, f"job {job_id} to end")
    return store.get(job_id)


SPEC = JobSpec(target_accuracy=0.5, max_rounds=4)


def test_a_job_that_reaches_its_target_succeeds(store: JobStore) -> None:
    """Rounds are recorded in order, and the job succeeds at the first round at the target."""
    runner = started(store, ScriptedExecution([0.2, 0.4, 0.6, 0.9]))
    try:
        job = ended(store, runner.submit(SPEC).job_id)
    finally:
        runner.stop()
    assert job.phase is JobPhase.SUCCEEDED
    assert "reached 0.5 at round 3" in job.reason
    assert (job.rounds_completed, job.initial_accuracy, job.time_to_accuracy_s) == (3, 0.05, 3.0)
    assert [r.round_index for r in store.rounds(job.job_id)] == [1, 2, 3]
    assert store.rounds(job.job_id)[0].start_time_s == 0.0  # stored relative to the start


def test_a_job_that_spends_its_budget_fails_saying_why(store: JobStore) -> None:
    """Four rounds below the target end the job FAILED with the accuracy and the target."""
    runner = started(store, ScriptedExecution([0.1, 0.2, 0.3, 0.4]))
    try:
        job = ended(store, runner.submit(SPEC).job_id)
    finally:
        runner.stop()
    assert job.phase is JobPhase.FAILED
    assert "4 rounds ended at accuracy 0.4000, below the target 0.5" in job.reason


@pytest.mark.parametrize(
    ("error", "reason"),
    [(PowerTripError("no data here"), "no data here"), (RuntimeError("bug"), "internal error")],
)
def test_an_error_fails_the_job_not_the_runner(
    store: JobStore, error: Exception, reason: str
) -> None:
    """An error in a job ends that job FAILED with the error; the runner takes the next one."""
    execution = ScriptedExecution([0.9], error=error)
    runner = started(store, execution)
    try:
        first = ended(store, runner.submit(SPEC).job_id)
        execution.error = None
        second = ended(store, runner.submit(SPEC).job_id)
    finally:
        runner.stop()
    assert (first.phase, second.phase) == (JobPhase.FAILED, JobPhase.SUCCEEDED)
    assert reason in first.reason


@pytest.mark.parametrize("limit", [1, 2])
def test_no_more_jobs_run_at_once_than_the_limit(store: JobStore, limit: int) -> None:
    """With a limit of N, N jobs run and the rest wait queued, in submission order."""
    execution = ScriptedExecution([0.9], gated=True)
    runner = started(store, execution, limit)
    try:
        ids = [runner.submit(SPEC).job_id for _ in range(4)]
        wait_for(lambda: len(execution.in_round) == limit, f"{limit} jobs in a round")
        assert [store.get(i).phase for i in ids] == [JobPhase.RUNNING] * limit + [
            JobPhase.QUEUED
        ] * (4 - limit)
        for _ in ids:
            execution.permits.release()
        for job_id in ids:
            assert ended(store, job_id).phase is JobPhase.SUCCEEDED
    finally:
        runner.stop()
    assert execution.most_at_once == limit


def test_cancel_a_queued_job_never_runs_it(store: JobStore) -> None:
    """A job cancelled while queued ends CANCELLED and is never executed."""
    execution = ScriptedExecution([0.9], gated=True)
    runner = started(store, execution)
    try:
        first = runner.submit(SPEC).job_id
        second = runner.submit(SPEC).job_id
        wait_for(lambda: first in execution.in_round, "the first job's round")
        assert runner.cancel(second).phase is JobPhase.CANCELLED
        execution.permits.release()
        ended(store, first)
    finally:
        runner.stop()
    assert second not in execution.resumes
    assert store.get(second).reason == "cancelled before it started"


def test_cancel_mid_round_keeps_the_whole_rounds_only(store: JobStore) -> None:
    """Cancelling during round 3 ends the job with rounds 1-2 and round 2's checkpoint."""
    execution = ScriptedExecution([0.1, 0.2, 0.3, 0.4], gated=True)
    runner = started(store, execution)
    try:
        job_id = runner.submit(SPEC).job_id
        execution.permits.release()
        execution.permits.release()
        wait_for(lambda: store.get(job_id).rounds_completed == 2, "two rounds")
        wait_for(lambda: job_id in execution.in_round, "round 3 to start")
        runner.cancel(job_id)
        job = ended(store, job_id)
    finally:
        runner.stop()
    assert (job.phase, job.rounds_completed, job.checkpoint_round) == (JobPhase.CANCELLED, 2, 2)
    assert job.reason == "cancelled by a user after round 2"
    assert [r.round_index for r in store.rounds(job_id)] == [1, 2]


def test_a_stopped_runner_requeues_and_the_next_one_resumes(store: JobStore) -> None:
    """Stopping mid-job queues it again; a new runner resumes from round 2's checkpoint and
    the history has each round exactly once."""
    execution = ScriptedExecution([0.1, 0.2, 0.3, 0.9], gated=True)
    runner = started(store, execution)
    job_id = runner.submit(SPEC).job_id
    execution.permits.release()
    execution.permits.release()
    wait_for(lambda: store.get(job_id).rounds_completed == 2, "two rounds")
    wait_for(lambda: job_id in execution.in_round, "round 3 to start")
    runner.stop()
    assert store.get(job_id).phase is JobPhase.QUEUED
    resumed = ScriptedExecution([0.1, 0.2, 0.3, 0.9])
    runner = started(store, resumed)
    try:
        job = ended(store, job_id)
    finally:
        runner.stop()
    resume = resumed.resumes[job_id]
    assert resume is not None
    assert [r.round_index for r in resume.records] == [1, 2]
    np.testing.assert_array_equal(resume.global_params["w"], [2.0, 2.0])
    assert (job.phase, job.resumes) == (JobPhase.SUCCEEDED, 1)
    assert [r.round_index for r in store.rounds(job_id)] == [1, 2, 3, 4]


def test_jobs_left_running_by_a_killed_aggregator_resume(store: JobStore) -> None:
    """A job the store says is running (its aggregator died) is queued again at start and
    resumes; one that a user had asked to cancel ends cancelled instead."""
    left = store.create(SPEC, 1.0).job_id
    cancelled = store.create(SPEC, 2.0).job_id
    for job_id in (left, cancelled):
        store.mark_running(job_id, 3.0)
    store.request_cancel(cancelled, 4.0)
    runner = started(store, ScriptedExecution([0.9]))
    try:
        assert ended(store, left).phase is JobPhase.SUCCEEDED
    finally:
        runner.stop()
    assert store.get(cancelled).phase is JobPhase.CANCELLED
    assert store.get(left).resumes == 1


class CheckpointSpy(MemoryJobStore):
    """Notes which rounds were saved with a checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[tuple[int, bool]] = []

    def save_round(self, job_id: str, record: RoundRecord, params: Params | None) -> None:
        self.saved.append((record.round_index, params is not None))
        super().save_round(job_id, record, params)


def test_checkpoints_every_n_rounds_and_at_the_end() -> None:
    """With checkpoint_every=2, rounds 2 and 4 and the final round 5 carry a checkpoint."""
    store = CheckpointSpy()
    runner = started(store, ScriptedExecution([0.1] * 5), checkpoint_every=2)
    try:
        ended(store, runner.submit(JobSpec(target_accuracy=0.5, max_rounds=5)).job_id)
    finally:
        runner.stop()
    assert store.saved == [(1, False), (2, True), (3, False), (4, True), (5, True)]


@pytest.mark.parametrize(("limit", "every"), [(0, 1), (1, 0)])
def test_runner_settings_are_checked(limit: int, every: int) -> None:
    """A concurrency or checkpoint interval below 1 is refused by name."""
    with pytest.raises(ValueError, match="must be >= 1"):
        JobRunner(MemoryJobStore(), ScriptedExecution([]), limit, every)
