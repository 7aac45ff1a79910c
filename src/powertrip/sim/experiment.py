"""Experiment files: what `powertrip simulate` runs, validated field by field.

Every constant of the simulation is a field here with a documented default; presets are YAML
files of this schema shipped in `powertrip/data/presets/`. Errors name the file and the field
path (`task.dirichlet_alpha`, `policies[2].k`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from powertrip.errors import PowerTripError
from powertrip.model.units import parse_size_bytes
from powertrip.selection import build_policy
from powertrip.selection.ranking import Ranker
from powertrip.sim.training import Engine
from powertrip.tasks.registry import TASK_MODELS
from powertrip.yaml_text import parse_yaml


class ExperimentError(PowerTripError, ValueError):
    """An experiment file is missing, malformed or invalid; the message names file and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DistanceLaw(_Strict):
    """Distances of the sites to the aggregator, in miles as the paper gives them."""

    law: Literal["uniform", "loguniform"] = "uniform"
    min_miles: float = Field(100.0, gt=0)
    max_miles: float = Field(10_000.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> DistanceLaw:
        if self.max_miles < self.min_miles:
            raise ValueError("max_miles must be >= min_miles")
        return self


class SitesConfig(_Strict):
    """The emulated sites: count, geography, links and hardware."""

    count: int = Field(100, ge=1)
    distance: DistanceLaw = DistanceLaw()
    bandwidth_max_bytes_per_s: float = Field(1.25e8, gt=0)
    bandwidth_knee_miles: float = Field(1000.0, gt=0)
    gpus: int = Field(8, ge=1)
    gpu_power_w: float = Field(700.0, gt=0)


class PowerConfig(_Strict):
    """Power availability: uniform U(min, max) per site, constant, or traces."""

    mode: Literal["uniform", "constant", "trace"] = "uniform"
    min_ratio: float = Field(0.1, gt=0, le=1)
    max_ratio: float = Field(1.0, gt=0, le=1)
    ratio: float = Field(1.0, gt=0, le=1)
    trace_source: str = Field(
        "synthetic", description="'synthetic' (generated, calibrated) or a folder of trace files"
    )
    trace_seed: int = 0

    @model_validator(mode="after")
    def _ordered(self) -> PowerConfig:
        if self.max_ratio < self.min_ratio:
            raise ValueError("max_ratio must be >= min_ratio")
        return self


class TaskConfig(_Strict):
    """The learning task, its data partition and local training."""

    name: str = "mnist"
    model: str = "mlp"
    data_dir: Path | None = None
    split: str = "balanced"
    partition: Literal["iid", "dirichlet", "natural"] = "dirichlet"
    dirichlet_alpha: float = Field(0.3, gt=0)
    min_samples_per_site: int = Field(8, ge=1)
    local_steps: int = Field(5, ge=1)
    batch_size: int = Field(32, ge=1)
    learning_rate: float = Field(0.05, gt=0)
    engine: Engine = Engine.AUTO

    @model_validator(mode="after")
    def _known(self) -> TaskConfig:
        if self.name not in TASK_MODELS:
            raise ValueError(f"unknown task {self.name!r}; valid tasks: {', '.join(TASK_MODELS)}")
        if self.model not in TASK_MODELS[self.name]:
            valid = ", ".join(TASK_MODELS[self.name])
            raise ValueError(f"task {self.name!r} has no model {self.model!r}; valid: {valid}")
        return self


class TimingConfig(_Strict):
    """Simulated time: T_0 at full power, transfers counted per round, round deadline."""

    base_compute_time_s: float = Field(120.0, gt=0)
    transfers_per_round: int = Field(1, ge=1, le=2)
    round_deadline_s: float | None = Field(None, gt=0)


class StaticOptimalConfig(_Strict):
    """The static-optimal baseline: a sweep of static-k over k = k_min, k_min + k_step, ..."""

    k_min: int = Field(10, ge=1)
    k_max: int | None = Field(None, ge=1)
    k_step: int = Field(10, ge=1)
    ranker: Ranker = Ranker.POWER_TO_COST


class Experiment(_Strict):
    """One experiment: a world per seed, every policy run in it, to a target accuracy."""

    name: str = "experiment"
    description: str = ""
    sites: SitesConfig = SitesConfig()
    power: PowerConfig = PowerConfig()
    task: TaskConfig = TaskConfig()
    timing: TimingConfig = TimingConfig()
    update_sizes: list[str | float] = Field(
        default_factory=lambda: list[str | float](["1.5GB"]), min_length=1
    )
    policies: list[dict[str, Any]] = Field(default_factory=lambda: [{"name": "powertrip"}])
    static_optimal: StaticOptimalConfig | None = None
    seeds: int | list[int] = 10
    target_accuracy: float = Field(0.8, gt=0, le=1)
    max_rounds: int = Field(100, ge=1)

    @field_validator("update_sizes")
    @classmethod
    def _sizes(cls, sizes: list[str | float]) -> list[str | float]:
        for size in sizes:
            parse_size_bytes(size)
        return sizes

    @field_validator("policies")
    @classmethod
    def _policies(cls, policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        labels = set()
        for index, config in enumerate(policies):
            settings = {k: v for k, v in config.items() if k != "label"}
            try:
                build_policy(settings)
            except PowerTripError as error:
                raise ValueError(f"policies[{index}]: {error}") from None
            label = policy_label(config)
            if label in labels:
                raise ValueError(f"policies[{index}]: two policies share the label {label!r}")
            labels.add(label)
        return policies

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: int | list[int]) -> int | list[int]:
        if (isinstance(seeds, int) and seeds < 1) or (isinstance(seeds, list) and not seeds):
            raise ValueError("seeds must be a count >= 1 or a non-empty list")
        return seeds

    @property
    def seed_list(self) -> list[int]:
        """The seeds to run."""
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def update_sizes_bytes(self) -> list[float]:
        """The update sizes in bytes."""
        return [parse_size_bytes(s) for s in self.update_sizes]

    def sweep_counts(self) -> list[int]:
        """The k values of the static-optimal sweep (empty without one)."""
        if self.static_optimal is None:
            return []
        top = min(self.static_optimal.k_max or self.sites.count, self.sites.count)
        counts = list(range(self.static_optimal.k_min, top + 1, self.static_optimal.k_step))
        return counts or [top]


def policy_label(config: dict[str, Any]) -> str:
    """A policy's display label: its `label`, else name and settings (`static-k k=70`)."""
    if "label" in config:
        return str(config["label"])
    settings = " ".join(f"{k}={v}" for k, v in config.items() if k != "name")
    return f"{config['name']} {settings}".strip()


def parse_experiment(document: Any, source: str) -> Experiment:
    """Validate a parsed document; errors list every bad field with its path."""
    if not isinstance(document, dict):
        raise ExperimentError(f"{source}: an experiment is a mapping of settings")
    try:
        return Experiment.model_validate(document)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            path = "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"]
            ).lstrip(".")
            lines.append(f"  {path or '(top level)'}: {problem['msg']}")
        raise ExperimentError(f"{source}: invalid experiment:\n" + "\n".join(lines)) from None


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ExperimentError(
            f"{path}: cannot read the experiment file: {error.strerror}"
        ) from None
    return parse_experiment(parse_yaml(text, str(path), ExperimentError), str(path))
