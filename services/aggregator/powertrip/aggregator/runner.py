"""The job runner: takes queued jobs from the store, runs at most N at once, records every
round as it ends, and decides how each job ends.

A job's life: queued -> running -> succeeded (target reached) | failed (round budget spent,
or an error, with the reason) | cancelled (by a user, queued or mid-round). When the
aggregator stops, its running jobs go back to the queue; when it starts, jobs it left running
(it was killed) are queued again. Either way a job resumes from the checkpoint of its last
recorded round, so no finished round is lost and none is recorded twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from powertrip.aggregator.job import JobSpec, Resume, run_job
from powertrip.aggregator.metrics import AggregatorMetrics
from powertrip.aggregator.store import JobPhase, JobRecord, JobStore
from powertrip.errors import PowerTripError
from powertrip.profiler.client import ProfilerClient
from powertrip.rounds import JobState

log = logging.getLogger(__name__)

StateHook = Callable[[JobState], None]


class Execute(Protocol):
    """Runs one job to its end (or until `stop`), calling the hooks as it goes."""

    def __call__(
        self,
        job: JobRecord,
        resume: Resume | None,
        stop: threading.Event,
        on_start: StateHook,
        on_round: StateHook,
    ) -> JobState: ...


class JobRunner:
    """Runs the store's queued jobs, `max_concurrent_jobs` at a time."""

    def __init__(
        self,
        store: JobStore,
        execute: Execute,
        max_concurrent_jobs: int = 1,
        checkpoint_every: int = 1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_concurrent_jobs < 1:
            raise ValueError(f"max_concurrent_jobs must be >= 1, got {max_concurrent_jobs}")
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        self.store = store
        self.execute = execute
        self.max_concurrent_jobs = max_concurrent_jobs
        self.checkpoint_every = checkpoint_every
        self.clock = clock
        self._running: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._shutdown = False
        self._dispatcher: threading.Thread | None = None

    def start(self) -> None:
        """Queue again the jobs a killed aggregator left running, then start dispatching."""
        for job in self.store.in_phase(JobPhase.RUNNING):
            if job.cancel_requested:
                self.store.finish(job.job_id, JobPhase.CANCELLED, _cancel_reason(job), self.clock())
            else:
                log.info("job %s: resuming after round %d", job.job_id, job.checkpoint_round)
                self.store.requeue(job.job_id, "the aggregator restarted; resuming")
        self._dispatcher = threading.Thread(target=self._dispatch, name="job-dispatcher")
        self._dispatcher.start()

    def submit(self, spec: JobSpec) -> JobRecord:
        """Queue a new job."""
        job = self.store.create(spec, self.clock())
        with self._wake:
            self._wake.notify_all()
        return job

    def cancel(self, job_id: str) -> JobRecord:
        """Cancel a job: a queued one at once, a running one by aborting its round."""
        with self._lock:
            job = self.store.request_cancel(job_id, self.clock())
            if job_id in self._running:
                self._running[job_id].set()
        return job

    def running(self) -> list[str]:
        """Ids of the jobs running now."""
        with self._lock:
            return list(self._running)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop dispatching; running jobs abort their round and go back to the queue."""
        with self._wake:
            self._shutdown = True
            for stop in self._running.values():
                stop.set()
            self._wake.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in [self._dispatcher, *self._threads]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _dispatch(self) -> None:
        with self._wake:
            while not self._shutdown:
                try:
                    self._start_queued()
                except Exception:  # a store that fails now may answer at the next wake-up
                    log.exception("could not start queued jobs")
                self._wake.wait(1.0)  # also picks up jobs queued by another path

    def _start_queued(self) -> None:
        """Start queued jobs, oldest first, while slots are free (called holding the lock)."""
        while len(self._running) < self.max_concurrent_jobs:
            job = self.store.next_queued()
            if job is None:
                return
            self._running[job.job_id] = threading.Event()
            try:
                job = self.store.mark_running(job.job_id, self.clock())
            except PowerTripError:  # cancelled between the two calls
                del self._running[job.job_id]
                continue
            thread = threading.Thread(target=self._run, args=(job,), name=job.job_id)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _run(self, job: JobRecord) -> None:
        job_id = job.job_id
        with self._lock:
            stop = self._running[job_id]
        try:
            if job.cancel_requested:
                stop.set()
            resume = self.store.resume_point(job_id)
            final = self.execute(
                job, resume, stop, self._on_start(job_id, resume), self._on_round(job)
            )
            self._conclude(job_id, final)
        except PowerTripError as error:
            self._end(job_id, JobPhase.FAILED, str(error))
        except Exception as error:  # a bug must end the job, not the aggregator
            log.exception("job %s failed", job_id)
            self._end(job_id, JobPhase.FAILED, f"internal error: {error!r}")
        finally:
            with self._wake:
                del self._running[job_id]
                self._wake.notify_all()

    def _on_start(self, job_id: str, resume: Resume | None) -> StateHook:
        def on_start(state: JobState) -> None:
            if resume is None:
                self.store.set_initial_accuracy(job_id, state.initial_accuracy)

        return on_start

    def _on_round(self, job: JobRecord) -> StateHook:
        spec = job.spec

        def on_round(state: JobState) -> None:
            record = state.records[-1].shifted(-state.start_time_s)
            index = record.round_index
            last = record.accuracy >= spec.target_accuracy or index >= spec.max_rounds
            keep = last or index % self.checkpoint_every == 0
            self.store.save_round(job.job_id, record, state.global_params if keep else None)

        return on_round

    def _conclude(self, job_id: str, final: JobState) -> None:
        job = self.store.get(job_id)
        rounds = len(final.records)
        if job.cancel_requested:
            self._end(job_id, JobPhase.CANCELLED, _cancel_reason(job))
        elif self._shutdown:
            self.store.requeue(job_id, f"the aggregator stopped after round {rounds}; resumes")
        elif final.accuracy >= job.spec.target_accuracy:
            self._end(
                job_id,
                JobPhase.SUCCEEDED,
                f"reached {job.spec.target_accuracy:g} at round {rounds} "
                f"(accuracy {final.accuracy:.4f}, {job.time_to_accuracy_s or 0:.1f} s)",
            )
        else:
            self._end(
                job_id,
                JobPhase.FAILED,
                f"round budget spent: {rounds} rounds ended at accuracy {final.accuracy:.4f}, "
                f"below the target {job.spec.target_accuracy:g}",
            )

    def _end(self, job_id: str, phase: JobPhase, reason: str) -> None:
        if (
            self._shutdown
            and phase is JobPhase.FAILED
            and not self.store.get(job_id).cancel_requested
        ):
            # An error while stopping (a round torn down mid-flight) is not the job's fault.
            self.store.requeue(job_id, f"the aggregator stopped ({reason}); resumes")
            return
        self.store.finish(job_id, phase, reason, self.clock())
        log.info("job %s %s: %s", job_id, phase, reason)


def _cancel_reason(job: JobRecord) -> str:
    return f"cancelled by a user after round {job.rounds_completed}"


class ProfiledExecution:
    """The real `Execute`: a job's rounds over the profiler's sites (`run_job`)."""

    def __init__(
        self,
        profiler: ProfilerClient,
        datasets_dir: Path | None = None,
        metrics: AggregatorMetrics | None = None,
    ) -> None:
        self.profiler = profiler
        self.datasets_dir = datasets_dir
        self.metrics = metrics

    def __call__(
        self,
        job: JobRecord,
        resume: Resume | None,
        stop: threading.Event,
        on_start: StateHook,
        on_round: StateHook,
    ) -> JobState:
        """Run `job` with `run_job`."""
        data_dir = None if self.datasets_dir is None else self.datasets_dir / job.spec.task
        return run_job(
            job.job_id,
            job.spec,
            self.profiler,
            stop,
            data_dir=data_dir,
            resume=resume,
            on_start=on_start,
            on_round=on_round,
            metrics=self.metrics,
        )
