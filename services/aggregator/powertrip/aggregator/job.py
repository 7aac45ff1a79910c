"""A training job on real sites: the shared round loop over the profiler and gRPC sites.

Each round: the profiler's profiles (less sites the aggregator saw fail) -> the selection
engine -> the global model streamed to the selected sites -> updates checked and folded as
they arrive (float32 sums, memory O(model)) -> held-out evaluation -> accuracy fed back to the
policy. When no site can take part the job waits for one, up to `wait_for_sites_s`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from powertrip.aggregator.clock import WallClock
from powertrip.aggregator.metrics import AggregatorMetrics
from powertrip.aggregator.profiles import NoSitesError, ProfiledSites, SiteHealth
from powertrip.aggregator.site_clients import GrpcSiteClient, JobTraining
from powertrip.errors import PowerTripError
from powertrip.fl.params import Params, check_update
from powertrip.profiler.client import ProfilerClient
from powertrip.rounds import (
    Deliver,
    JobSettings,
    JobState,
    RoundLoop,
    RoundRecord,
    SiteReport,
    TrainRequest,
)
from powertrip.selection import build_policy
from powertrip.selection.registry import policy_json_schema
from powertrip.transport.payload import encode_params

log = logging.getLogger(__name__)


MAX_SEED = 2**53 - 1  # the largest integer every JSON client reads exactly


class JobSpec(BaseModel):
    """What a user asks of a training job (a REST body, or part of a job file).

    Task, model and policy are checked against what exists, so a bad name is refused when the
    job is submitted, with the valid names, rather than when it starts.
    """

    # Strict: `false` is not 0.0 and "3" is not 3 (a JSON int still counts as a float).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    task: str = Field(default="mnist", description="Task name (mnist, digits, emnist, ...).")
    model: str = Field(default="mlp", description="Model of the task (mlp, cnn, lstm).")
    policy: dict[str, Any] = Field(
        default_factory=lambda: {"name": "powertrip"},
        description="Selection policy: its `name` and its settings, e.g. "
        '{"name": "static-k", "k": 8}.',
        json_schema_extra=policy_json_schema(),
    )
    target_accuracy: float = Field(default=0.8, gt=0, le=1)
    max_rounds: int = Field(default=30, ge=1, le=100_000)
    local_steps: int = Field(default=20, ge=1, le=1_000_000, description="SGD steps per round.")
    local_epochs: float | None = Field(
        default=None,
        gt=0,
        le=1_000,
        description="Passes over each site's shard per round (replaces local_steps when set).",
    )
    batch_size: int = Field(default=32, ge=1, le=65_536)
    learning_rate: float = Field(default=0.05, gt=0, le=100)
    update_size_bytes: float | None = Field(
        default=None,
        gt=0,
        le=1e15,
        description="Emulated update size the policy plans with (default: the model's).",
    )
    round_deadline_s: float | None = Field(default=120.0, gt=0, le=86_400)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    wait_for_sites_s: float = Field(default=60.0, ge=0, le=86_400)

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        from powertrip.tasks.registry import TASK_NAMES

        if task not in TASK_NAMES:
            raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(TASK_NAMES)}")
        return task

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str, info: ValidationInfo) -> str:
        from powertrip.tasks.registry import TASK_MODELS

        task = info.data.get("task")
        valid = TASK_MODELS.get(task, ()) if isinstance(task, str) else ()
        if task in TASK_MODELS and model not in valid:
            raise ValueError(
                f"task {task!r} has no model {model!r}; valid models: {', '.join(valid)}"
            )
        return model

    @field_validator("policy")
    @classmethod
    def _buildable_policy(cls, policy: dict[str, Any]) -> dict[str, Any]:
        try:
            build_policy(policy)
        except (PowerTripError, TypeError, ValueError) as error:
            raise ValueError(str(error)) from None
        return policy

    def training(self, job_id: str) -> JobTraining:
        """The local-training settings sent to every site."""
        return JobTraining(
            job_id,
            self.local_steps,
            self.batch_size,
            self.learning_rate,
            self.seed,
            self.local_epochs,
        )


class JobFile(JobSpec):
    """A job run by `powertrip aggregator --job FILE`: a spec with its id and data folder."""

    job_id: str = Field(default="job", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    data_dir: Path | None = Field(default=None, strict=False)  # a string in YAML


@dataclass(frozen=True)
class Resume:
    """Where a job picks up again: the global model and rounds of its last checkpoint, with
    round times relative to the job's start (time the aggregator was down is not counted)."""

    global_params: Params
    initial_accuracy: float
    records: tuple[RoundRecord, ...]


class HealthTrackingSites:
    """A `SiteClient` that tells `SiteHealth` about every site that failed or was late."""

    def __init__(self, client: GrpcSiteClient, health: SiteHealth) -> None:
        self.client = client
        self.health = health

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Train through the wrapped client, observing each report on its way."""

        def observe(report: SiteReport) -> None:
            if not (self.client.abort is not None and self.client.abort.is_set()):
                self.health.observe((report,))  # an aborted round says nothing of the sites
            deliver(report)

        self.client.train(request, observe)


def run_job(
    job_id: str,
    spec: JobSpec,
    profiler: ProfilerClient,
    stop: threading.Event,
    *,
    data_dir: Path | None = None,
    resume: Resume | None = None,
    on_start: Callable[[JobState], None] | None = None,
    on_round: Callable[[JobState], None] | None = None,
    metrics: AggregatorMetrics | None = None,
    poll_s: float = 0.5,
) -> JobState:
    """Run `spec` until its target, its round budget, or `stop`; the final state.

    Setting `stop` aborts the round in progress: that round is not recorded and never reaches
    `on_round`, so the job's history ends at its last whole round. With `resume` the job goes
    on from a checkpoint and draws what the uninterrupted job would have (DESIGN §4).
    """
    from powertrip.sim.training import model_params
    from powertrip.sim.world import TorchEvaluator
    from powertrip.tasks import build_model, load_task

    dataset = load_task(spec.task, data_dir)
    model = build_model(spec.task, spec.model, dataset, spec.seed)
    initial = {n: t.numpy().copy() for n, t in model_params(model).items()}
    payload_bytes = encode_params(initial).nbytes
    health = SiteHealth()
    profiles = ProfiledSites(profiler, health)
    client = GrpcSiteClient(profiles.addresses, spec.training(job_id), abort=stop)
    clock = WallClock()
    loop = RoundLoop(
        build_policy(spec.policy),
        profiles,
        HealthTrackingSites(client, health),
        TorchEvaluator(model, dataset.test_x, dataset.test_y),
        clock,
        JobSettings(
            update_size_bytes=spec.update_size_bytes or float(payload_bytes),
            target_accuracy=spec.target_accuracy,
            max_rounds=spec.max_rounds,
            round_deadline_s=spec.round_deadline_s,
            seed=spec.seed,
        ),
        accumulate_dtype=np.float32,
    )
    try:
        if resume is None:
            state = loop.start(initial)
        else:
            check_update(initial, resume.global_params, "the checkpoint")
            elapsed_s = resume.records[-1].end_time_s if resume.records else 0.0
            start_s = clock.now() - elapsed_s
            state = JobState(
                global_params=dict(resume.global_params),
                initial_accuracy=resume.initial_accuracy,
                start_time_s=start_s,
                records=tuple(r.shifted(start_s) for r in resume.records),
            )
        if on_start is not None:
            on_start(state)
        waiting_since: float | None = None
        while not loop.finished(state) and not stop.is_set():
            try:
                after = loop.run_round(state)
            except NoSitesError as error:
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since > spec.wait_for_sites_s:
                    raise PowerTripError(
                        f"job {job_id}: waited {spec.wait_for_sites_s:.0f} s: {error}"
                    ) from None
                stop.wait(poll_s)
                continue
            if stop.is_set():
                log.info("job %s: round %d aborted, not recorded", job_id, len(after.records))
                break
            state = after
            waiting_since = None
            if metrics is not None:
                metrics.observe(job_id, state.records[-1], payload_bytes)
            if on_round is not None:
                on_round(state)
        return state
    finally:
        client.close()
