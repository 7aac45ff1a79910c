"""A site's training worker: its data shard, its model, local SGD under its power limit.

The shard is deterministic: site `index` of `count` gets the same rows of the task's training
set for the same seed and partition, wherever it runs. Training is the simulator's
`BatchedTrainer` with one site, on CPU or CUDA. Without a real power cap (no GPU under NVML),
the worker emulates one: it waits until its measured compute time is stretched to
measured / availability, so the aggregator sees in real time what the power limit costs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from numpy.typing import NDArray

from powertrip.fl.params import InvalidUpdateError, check_update
from powertrip.sim import partition
from powertrip.sim.training import BatchedTrainer, LocalTraining, model_params
from powertrip.site.power import PowerReading, PowerSource
from powertrip.tasks import build_model, load_task


@dataclass(frozen=True)
class ShardSpec:
    """Which data a site holds: its index among `count` sites of a seeded partition."""

    task: str = "mnist"
    model: str = "mlp"
    data_dir: Path | None = None
    seed: int = 0
    index: int = 0
    count: int = 1
    partition: str = "dirichlet"
    dirichlet_alpha: float = 0.3
    min_samples: int = 8


@dataclass(frozen=True)
class TrainOrder:
    """What one round asks of the site."""

    round_index: int
    local_steps: int
    batch_size: int
    learning_rate: float
    power_cap_ratio: float | None = None
    seed: int = 0
    local_epochs: float | None = None

    def steps_for(self, num_samples: int) -> int:
        """SGD steps to take on a shard of `num_samples`: `local_epochs` passes when set."""
        if self.local_epochs:
            return max(1, math.ceil(self.local_epochs * num_samples / self.batch_size))
        return self.local_steps


@dataclass(frozen=True)
class TrainResult:
    """The site's update and what it cost."""

    update: dict[str, NDArray[np.float32]]
    num_samples: int
    compute_time_s: float
    power_available_ratio: float


class SiteWorker:
    """Holds a shard and trains the global model on it."""

    def __init__(
        self,
        spec: ShardSpec,
        power: PowerSource,
        device: str = "cpu",
        emulate_power: bool = True,
        clock: Callable[[], float] = time.perf_counter,
        stop: threading.Event | None = None,
    ) -> None:
        dataset = load_task(spec.task, spec.data_dir)
        rng = np.random.default_rng([spec.seed, 1])
        labels = dataset.train_y.numpy()
        if spec.partition == "iid":
            shards = partition.iid(labels.size, spec.count, rng)
        elif spec.partition == "dirichlet":
            shards = partition.dirichlet(
                labels, spec.count, spec.dirichlet_alpha, rng, spec.min_samples
            )
        else:
            if dataset.train_groups is None:
                raise InvalidUpdateError(f"task {spec.task!r} has no writers or speakers")
            shards = partition.natural(dataset.train_groups, spec.count, rng)
        rows = torch.from_numpy(shards[spec.index])
        self.device = torch.device(device)
        self.x = dataset.train_x[rows].to(self.device)
        self.y = dataset.train_y[rows].to(self.device)
        self.model = build_model(spec.task, spec.model, dataset, spec.seed).to(self.device)
        self.reference = {n: p.cpu().numpy() for n, p in model_params(self.model).items()}
        self.power = power
        self.emulate_power = emulate_power
        self.clock = clock
        self.stop = stop or threading.Event()

    @property
    def num_samples(self) -> int:
        """Training samples in the shard."""
        return int(self.y.numel())

    def read_power(self) -> PowerReading:
        """The site's power now."""
        return self.power.read()

    def train(
        self, order: TrainOrder, params: Mapping[str, NDArray[np.generic]], sender: str
    ) -> TrainResult:
        """Local SGD from `params`; raises `InvalidUpdateError` if they do not fit the model."""
        check_update(self.reference, params, sender)  # type: ignore[arg-type]
        ratio = self.read_power().power_available_ratio
        if order.power_cap_ratio:
            ratio = min(ratio, order.power_cap_ratio)
        trainer = BatchedTrainer(
            self.model,
            LocalTraining(order.steps_for(self.num_samples), order.batch_size, order.learning_rate),
        )
        start = self.clock()
        trained = trainer.train(
            {n: torch.from_numpy(np.array(v)).to(self.device) for n, v in params.items()},
            self.x,
            self.y,
            torch.zeros(1, dtype=torch.int64, device=self.device),
            torch.full((1,), self.num_samples, dtype=torch.int64, device=self.device),
            torch.Generator().manual_seed(order.seed * 1_000_003 + order.round_index),
        )
        measured_s = self.clock() - start
        compute_s = measured_s / ratio if self.emulate_power else measured_s
        if self.emulate_power:
            self.stop.wait(compute_s - measured_s)  # returns early when the site shuts down
        update = {n: t[0].detach().cpu().numpy().astype(np.float32) for n, t in trained.items()}
        return TrainResult(update, self.num_samples, compute_s, ratio)
