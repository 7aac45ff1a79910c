"""A scripted job execution for runner and API tests: rounds without training."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from powertrip.aggregator.job import Resume
from powertrip.aggregator.runner import StateHook
from powertrip.aggregator.store import JobRecord
from powertrip.rounds import JobState, RoundRecord

TIMEOUT_S = 10.0


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    """Poll `condition` (state held by another thread or process) until true or timeout."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class ScriptedExecution:
    """Rounds whose accuracy follows `accuracies`; with `gated`, each round waits for a
    permit (or for `stop`, which aborts the round unrecorded, as run_job does)."""

    def __init__(
        self, accuracies: list[float], gated: bool = False, error: Exception | None = None
    ) -> None:
        self.accuracies = accuracies
        self.gated = gated
        self.error = error
        self.permits = threading.Semaphore(0)
        self.resumes: dict[str, Resume | None] = {}
        self.in_round: set[str] = set()
        self.most_at_once = 0
        self._lock = threading.Lock()

    def __call__(
        self,
        job: JobRecord,
        resume: Resume | None,
        stop: threading.Event,
        on_start: StateHook,
        on_round: StateHook,
    ) -> JobState:
        self.resumes[job.job_id] = resume
        if self.error is not None:
            raise self.error
        state = JobState(
            global_params=resume.global_params if resume else {"w": np.zeros(2, np.float32)},
            initial_accuracy=resume.initial_accuracy if resume else 0.05,
            start_time_s=100.0,
            records=tuple(r.shifted(100.0) for r in resume.records) if resume else (),
        )
        on_start(state)
        while (
            len(state.records) < job.spec.max_rounds and state.accuracy < job.spec.target_accuracy
        ):
            index = len(state.records) + 1
            with self._lock:
                self.in_round.add(job.job_id)
                self.most_at_once = max(self.most_at_once, len(self.in_round))
            try:
                while self.gated and not self.permits.acquire(timeout=0.01):
                    if stop.is_set():
                        return state
                if stop.is_set():
                    return state
            finally:
                with self._lock:
                    self.in_round.discard(job.job_id)
            record = RoundRecord(
                round_index=index,
                start_time_s=100.0 + index - 1,
                end_time_s=100.0 + index,
                candidate_count=3,
                selected_site_ids=("a", "b"),
                completed_site_ids=("a", "b"),
                dropped=(),
                compute_time_s=0.5,
                communication_time_s=0.5,
                accuracy=self.accuracies[min(index, len(self.accuracies)) - 1],
                accuracy_gain=0.0,
                mean_power_available_ratio=1.0,
            )
            state = JobState(
                {"w": np.full(2, index, np.float32)},
                state.initial_accuracy,
                state.start_time_s,
                (*state.records, record),
            )
            on_round(state)
        return state
