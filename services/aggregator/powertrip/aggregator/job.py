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
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from powertrip.aggregator.clock import WallClock
from powertrip.aggregator.metrics import AggregatorMetrics
from powertrip.aggregator.profiles import NoSitesError, ProfiledSites, SiteHealth
from powertrip.aggregator.site_clients import GrpcSiteClient, JobTraining
from powertrip.errors import PowerTripError
from powertrip.profiler.client import ProfilerClient
from powertrip.rounds import Deliver, JobSettings, JobState, RoundLoop, SiteReport, TrainRequest
from powertrip.selection import build_policy
from powertrip.transport.payload import encode_params

log = logging.getLogger(__name__)


class JobSpec(BaseModel):
    """What a user asks of a training job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(default="job", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    task: str = "mnist"
    model: str = "mlp"
    data_dir: Path | None = None
    policy: dict[str, Any] = Field(default_factory=lambda: {"name": "powertrip"})
    target_accuracy: float = Field(default=0.8, gt=0, le=1)
    max_rounds: int = Field(default=30, ge=1, le=100_000)
    local_steps: int = Field(default=20, ge=1)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=0.05, gt=0)
    update_size_bytes: float | None = Field(
        default=None, gt=0, description="Update size the policy plans with (default: the model's)."
    )
    round_deadline_s: float | None = Field(default=120.0, gt=0)
    seed: int = Field(default=0, ge=0)
    wait_for_sites_s: float = Field(default=60.0, ge=0)


class HealthTrackingSites:
    """A `SiteClient` that tells `SiteHealth` about every site that failed or was late."""

    def __init__(self, client: GrpcSiteClient, health: SiteHealth) -> None:
        self.client = client
        self.health = health

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Train through the wrapped client, observing each report on its way."""

        def observe(report: SiteReport) -> None:
            self.health.observe((report,))
            deliver(report)

        self.client.train(request, observe)


def run_job(
    spec: JobSpec,
    profiler: ProfilerClient,
    stop: threading.Event,
    on_round: Callable[[JobState], None] | None = None,
    metrics: AggregatorMetrics | None = None,
    poll_s: float = 0.5,
) -> JobState:
    """Run `spec` until its target, its round budget, or `stop`; the final state."""
    from powertrip.sim.training import model_params
    from powertrip.sim.world import TorchEvaluator
    from powertrip.tasks import build_model, load_task

    dataset = load_task(spec.task, spec.data_dir)
    model = build_model(spec.task, spec.model, dataset, spec.seed)
    initial = {n: t.numpy().copy() for n, t in model_params(model).items()}
    payload_bytes = encode_params(initial).nbytes
    health = SiteHealth()
    profiles = ProfiledSites(profiler, health)
    training = JobTraining(
        spec.job_id, spec.local_steps, spec.batch_size, spec.learning_rate, spec.seed
    )
    client = GrpcSiteClient(profiles.addresses, training)
    loop = RoundLoop(
        build_policy(spec.policy),
        profiles,
        HealthTrackingSites(client, health),
        TorchEvaluator(model, dataset.test_x, dataset.test_y),
        WallClock(),
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
        state = loop.start(initial)
        waiting_since: float | None = None
        while not loop.finished(state) and not stop.is_set():
            try:
                state = loop.run_round(state)
            except NoSitesError as error:
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since > spec.wait_for_sites_s:
                    raise PowerTripError(
                        f"job {spec.job_id}: waited {spec.wait_for_sites_s:.0f} s: {error}"
                    ) from None
                stop.wait(poll_s)
                continue
            waiting_since = None
            if metrics is not None:
                metrics.observe(spec.job_id, state.records[-1], payload_bytes)
            if on_round is not None:
                on_round(state)
        return state
    finally:
        client.close()
