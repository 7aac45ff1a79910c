"""Run an experiment: for each update size and seed one world, every policy run in it, and
the static-k sweep that yields the static-optimal baseline.

All policies of a seed share its world (distances, power, data partition) and initial model,
so their time-to-accuracy differs only by their choices. Each finished run is appended to
`results.json` at once (written to a temporary file, then renamed), so an interrupted
experiment keeps every finished run, and running it again into the same folder resumes.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import SiteTable
from powertrip.model.units import miles_to_km
from powertrip.rounds import JobSettings, JobState, RoundLoop, SimulatedClock
from powertrip.selection import build_policy
from powertrip.sim import partition
from powertrip.sim.experiment import Experiment, ExperimentError, policy_label
from powertrip.sim.power import ConstantPower, PowerSource, TracePower
from powertrip.sim.training import BatchedTrainer, LocalTraining, model_params
from powertrip.sim.world import SimulatedProfiles, SimulatedSites, SiteData, TorchEvaluator
from powertrip.tasks import Dataset, build_model, load_task
from powertrip.traces.google import PowerDomainTrace, load_trace_dir
from powertrip.traces.synthetic import generate_traces

RESULTS_FILE = "results.json"


@dataclass(frozen=True)
class RunSpec:
    """One training run: a policy in the world of one seed and update size."""

    label: str
    policy: dict[str, Any]
    seed: int
    update_size_bytes: float
    sweep_k: int | None = None

    @property
    def key(self) -> tuple[str, int, float]:
        """Identifies the run within an experiment."""
        return (self.label, self.seed, self.update_size_bytes)


@dataclass(frozen=True, eq=False)
class World:
    """Everything a seed fixes: sites, their power over time, their data shards."""

    sites: SiteTable
    power: PowerSource
    data: SiteData
    dataset: Dataset


def plan_runs(experiment: Experiment) -> list[RunSpec]:
    """Every run of the experiment, policies first, then the sweep, seed by seed."""
    specs = []
    for size in experiment.update_sizes_bytes:
        for seed in experiment.seed_list:
            for config in experiment.policies:
                settings = {k: v for k, v in config.items() if k != "label"}
                specs.append(RunSpec(policy_label(config), settings, seed, size))
            if experiment.static_optimal is not None:
                ranker = experiment.static_optimal.ranker.value
                for k in experiment.sweep_counts():
                    policy = {"name": "static-k", "k": k, "ranker": ranker}
                    specs.append(RunSpec(f"sweep k={k}", policy, seed, size, sweep_k=k))
    return specs


class WorldBuilder:
    """Builds (and caches) the world of each seed; traces are read once per experiment."""

    def __init__(self, experiment: Experiment, trace_cache: Path) -> None:
        self.experiment = experiment
        self.trace_cache = trace_cache

    @functools.cached_property
    def dataset(self) -> Dataset:
        """The task's dataset."""
        task = self.experiment.task
        return load_task(task.name, task.data_dir, task.split)

    @functools.cached_property
    def traces(self) -> list[PowerDomainTrace]:
        """Power-domain traces: generated into the cache, or read from the given folder."""
        power = self.experiment.power
        if power.trace_source != "synthetic":
            return load_trace_dir(Path(power.trace_source))
        folder = self.trace_cache / f"synthetic-seed{power.trace_seed}"
        if not (folder / ".complete").exists():
            generate_traces(folder, seed=power.trace_seed)
            (folder / ".complete").touch()
        return load_trace_dir(folder)

    @functools.lru_cache(maxsize=2)  # noqa: B019 - one builder per experiment run
    def world(self, seed: int) -> World:
        """The world of `seed` (the same every time)."""
        config = self.experiment
        rng = np.random.default_rng([seed, 0])
        n = config.sites.count
        law = config.sites.distance
        if law.law == "uniform":
            miles = rng.uniform(law.min_miles, law.max_miles, n)
        else:
            miles = np.exp(rng.uniform(np.log(law.min_miles), np.log(law.max_miles), n))
        distance_km = miles_to_km(miles)
        bandwidth = BandwidthLaw(
            config.sites.bandwidth_max_bytes_per_s, miles_to_km(config.sites.bandwidth_knee_miles)
        ).bandwidth_bytes_per_s(distance_km)
        sites = SiteTable.from_arrays(
            [f"site-{i:03d}" for i in range(n)],
            distance_km=distance_km,
            bandwidth_bytes_per_s=bandwidth,
            gpus=config.sites.gpus,
            gpu_power_w=config.sites.gpu_power_w,
            power_available_ratio=1.0,
        )
        return World(sites, self._power(rng, n), self._data(rng, n), self.dataset)

    def _power(self, rng: np.random.Generator, n: int) -> PowerSource:
        power = self.experiment.power
        if power.mode == "uniform":
            return ConstantPower(rng.uniform(power.min_ratio, power.max_ratio, n))
        if power.mode == "constant":
            return ConstantPower(np.full(n, power.ratio))
        return TracePower.from_traces(self.traces, n, rng)

    def _data(self, rng: np.random.Generator, n: int) -> SiteData:
        task, dataset = self.experiment.task, self.dataset
        labels = dataset.train_y.numpy()
        if task.partition == "iid":
            shards = partition.iid(labels.size, n, rng)
        elif task.partition == "dirichlet":
            shards = partition.dirichlet(
                labels, n, task.dirichlet_alpha, rng, task.min_samples_per_site
            )
        else:
            if dataset.train_groups is None:
                raise ExperimentError(
                    f"task {task.name!r} has no writers or speakers: use partition iid or dirichlet"
                )
            shards = partition.natural(dataset.train_groups, n, rng)
        return SiteData.from_shards(dataset.train_x, dataset.train_y, shards)


def run_one(
    experiment: Experiment,
    spec: RunSpec,
    world: World,
    on_round: Callable[[JobState], None] | None = None,
) -> dict[str, Any]:
    """Train one run to the target (or the round limit) and return its record."""
    task, timing = experiment.task, experiment.timing
    model = build_model(task.name, task.model, world.dataset, seed=spec.seed)
    trainer = BatchedTrainer(
        model, LocalTraining(task.local_steps, task.batch_size, task.learning_rate, task.engine)
    )
    clock = SimulatedClock()
    profiles = SimulatedProfiles(world.sites, world.power)
    sites = SimulatedSites(
        profiles,
        world.data,
        trainer,
        clock,
        timing.base_compute_time_s,
        spec.update_size_bytes,
        timing.transfers_per_round,
        seed=spec.seed,
    )
    settings = JobSettings(
        update_size_bytes=spec.update_size_bytes,
        target_accuracy=experiment.target_accuracy,
        max_rounds=experiment.max_rounds,
        transfers_per_round=timing.transfers_per_round,
        round_deadline_s=timing.round_deadline_s,
        seed=spec.seed,
    )
    evaluator = TorchEvaluator(model, world.dataset.test_x, world.dataset.test_y)
    loop = RoundLoop(build_policy(spec.policy), profiles, sites, evaluator, clock, settings)
    initial = {name: value.numpy().copy() for name, value in model_params(model).items()}
    state = loop.run(loop.start(initial), on_round)
    return run_record(spec, state, experiment.target_accuracy)


def run_record(spec: RunSpec, state: JobState, target: float) -> dict[str, Any]:
    """A run as plain JSON data."""
    tta = state.time_to_accuracy_s(target)
    return {
        "label": spec.label,
        "policy": spec.policy,
        "seed": spec.seed,
        "update_size_bytes": spec.update_size_bytes,
        "sweep_k": spec.sweep_k,
        "reached_target": tta is not None,
        "time_to_accuracy_s": tta,
        "rounds": len(state.records),
        "final_accuracy": state.accuracy,
        "initial_accuracy": state.initial_accuracy,
        "round_log": [
            {
                "round": r.round_index,
                "end_time_s": r.end_time_s - state.start_time_s,
                "selected": list(r.selected_site_ids),
                "dropped": [list(d) for d in r.dropped],
                "compute_time_s": r.compute_time_s,
                "communication_time_s": r.communication_time_s,
                "round_time_s": r.round_time_s,
                "accuracy": r.accuracy,
                "mean_power_available_ratio": r.mean_power_available_ratio,
            }
            for r in state.records
        ],
    }


class ResultsStore:
    """`results.json` of an experiment, rewritten atomically after every finished run."""

    def __init__(self, out_dir: Path, experiment: Experiment) -> None:
        self.path = out_dir / RESULTS_FILE
        self.document: dict[str, Any] = {
            "experiment": experiment.model_dump(mode="json"),
            "runs": [],
        }
        if self.path.exists():
            try:
                existing = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError) as error:
                raise ExperimentError(
                    f"{self.path}: cannot read earlier results: {error}"
                ) from None
            if existing.get("experiment") != self.document["experiment"]:
                raise ExperimentError(
                    f"{self.path} holds results of a different experiment; choose another "
                    "output folder (nothing was overwritten)"
                )
            self.document = existing
        out_dir.mkdir(parents=True, exist_ok=True)

    def done(self) -> set[tuple[str, int, float]]:
        """Keys of the runs already finished."""
        return {(r["label"], r["seed"], r["update_size_bytes"]) for r in self.document["runs"]}

    def add(self, record: dict[str, Any]) -> None:
        """Append a run and write the file atomically."""
        self.document["runs"].append(record)
        temporary = self.path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.document, indent=1))
        os.replace(temporary, self.path)
