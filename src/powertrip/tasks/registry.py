"""Tasks and models by name, with errors that list the valid names."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from powertrip.tasks.datasets import Dataset, DatasetError, mnist_5k, sklearn_digits
from powertrip.tasks.files import load_emnist, load_shakespeare, load_speech_commands
from powertrip.tasks.models import MLP, CharLSTM, SmallCNN

TASK_MODELS: dict[str, tuple[str, ...]] = {
    "mnist": ("cnn", "mlp"),
    "digits": ("cnn", "mlp"),
    "emnist": ("cnn", "mlp"),
    "shakespeare": ("lstm",),
    "speech-commands": ("cnn",),
}
TASK_NAMES = tuple(TASK_MODELS)
FILE_TASKS = {"emnist", "shakespeare", "speech-commands"}


def load_task(name: str, data_dir: Path | None = None, split: str = "balanced") -> Dataset:
    """The dataset of a task; file-based tasks need `data_dir`."""
    if name not in TASK_MODELS:
        raise DatasetError(f"unknown task {name!r}; valid tasks: {', '.join(TASK_NAMES)}")
    if name in FILE_TASKS and data_dir is None:
        raise DatasetError(f"task {name!r} reads local files: set its data_dir")
    loaders: dict[str, Callable[[], Dataset]] = {
        "mnist": mnist_5k,
        "digits": sklearn_digits,
        "emnist": lambda: load_emnist(_existing(data_dir), split),
        "shakespeare": lambda: load_shakespeare(_existing(data_dir)),
        "speech-commands": lambda: load_speech_commands(_existing(data_dir)),
    }
    return loaders[name]()


def _existing(directory: Path | None) -> Path:
    assert directory is not None
    if not directory.is_dir():
        raise DatasetError(f"{directory}: data_dir does not exist or is not a folder")
    return directory


def build_model(task: str, model: str, dataset: Dataset, seed: int) -> nn.Module:
    """A freshly initialised model for the task, the same for the same seed."""
    valid = TASK_MODELS.get(task, ())
    if model not in valid:
        raise DatasetError(
            f"task {task!r} has no model {model!r}; valid models: {', '.join(valid) or '(none)'}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        shape = dataset.input_shape
        if model == "lstm":
            return CharLSTM(dataset.num_classes)
        if model == "mlp":
            return MLP(math.prod(shape), 64, dataset.num_classes)
        return SmallCNN(shape[0], shape[1], shape[2], dataset.num_classes)
