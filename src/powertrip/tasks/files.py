"""Readers for datasets a user has on disk, in their standard formats.

- EMNIST: the IDX files torchvision uses (`emnist-<split>-{train,test}-{images-idx3,labels-idx1}
  -ubyte`, optionally `.gz`).
- LEAF Shakespeare: `train/*.json` and `test/*.json`, each `{"users", "num_samples",
  "user_data": {user: {"x": [80-char strings], "y": [next chars]}}}`; the speaker (user) of
  each sample is kept for the natural non-IID partition.
- Speech Commands: `<root>/<word>/<speaker>_nohash_<n>.wav` (16 kHz mono 16-bit) with
  `testing_list.txt` naming the held-out files; the speaker is kept as the group.

Every error names the file and what is wrong.
"""

from __future__ import annotations

import gzip
import json
import wave
from pathlib import Path

import numpy as np
import torch
from numpy.typing import NDArray

from powertrip.tasks.datasets import Dataset, DatasetError

IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.int16, 0x0C: np.int32, 0x0D: np.float32}
# LEAF's character set for Shakespeare (its `ALL_LETTERS`); unknown characters map to index 0.
SHAKESPEARE_LETTERS = (
    "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
)
SPEECH_SAMPLE_RATE = 16_000


def read_idx(path: Path) -> NDArray[np.generic]:
    """An IDX array (the MNIST/EMNIST container), plain or gzip-compressed."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise DatasetError(f"{path}: cannot read IDX file: {error}") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_DTYPES:
        raise DatasetError(f"{path}: not an IDX file (bad magic number)")
    dtype = np.dtype(IDX_DTYPES[data[2]]).newbyteorder(">")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise DatasetError(
            f"{path}: IDX header promises {shape} ({expected} bytes), file holds "
            f"{len(data) - header} bytes"
        )
    return (
        np.frombuffer(data, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def _find(directory: Path, stem: str) -> Path:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise DatasetError(f"{directory}: missing {stem} (or {stem}.gz)")


def load_emnist(directory: Path, split: str = "balanced") -> Dataset:
    """EMNIST `split` (balanced, byclass, digits, letters, ...) from torchvision IDX files."""
    parts = {}
    for part in ("train", "test"):
        images = read_idx(_find(directory, f"emnist-{split}-{part}-images-idx3-ubyte"))
        labels = read_idx(_find(directory, f"emnist-{split}-{part}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise DatasetError(
                f"{directory}: emnist-{split}-{part}: {images.shape[0]} images of shape "
                f"{images.shape[1:]} for {labels.shape[0]} labels"
            )
        # EMNIST stores images transposed relative to MNIST.
        pixels = np.swapaxes(images, 1, 2).astype(np.float32)[:, None] / 255.0
        parts[part] = (pixels, labels.astype(np.int64))
    labels_all = np.concatenate([parts["train"][1], parts["test"][1]])
    offset = int(labels_all.min())  # the letters split counts from 1
    return Dataset(
        name=f"emnist-{split}",
        train_x=torch.from_numpy(np.ascontiguousarray(parts["train"][0])),
        train_y=torch.from_numpy(parts["train"][1] - offset),
        test_x=torch.from_numpy(np.ascontiguousarray(parts["test"][0])),
        test_y=torch.from_numpy(parts["test"][1] - offset),
        num_classes=int(labels_all.max()) - offset + 1,
    )


def _encode(text: str) -> list[int]:
    return [max(SHAKESPEARE_LETTERS.find(c), 0) for c in text]


def _read_leaf(files: list[Path]) -> tuple[list[list[int]], list[int], list[str]]:
    xs: list[list[int]] = []
    ys: list[int] = []
    users: list[str] = []
    for path in files:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            for user, data in document["user_data"].items():
                if len(data["x"]) != len(data["y"]):
                    raise DatasetError(f"{path}: user {user!r} has {len(data['x'])} x and "
                                       f"{len(data['y'])} y")  # fmt: skip
                for x, y in zip(data["x"], data["y"], strict=True):
                    if len(y) != 1:
                        raise DatasetError(f"{path}: user {user!r}: y must be one character")
                    xs.append(_encode(x))
                    ys.append(_encode(y)[0])
                    users.append(user)
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
            raise DatasetError(f"{path}: not a LEAF JSON file: {error!r}") from None
    return xs, ys, users


def load_shakespeare(directory: Path, sequence_length: int = 80) -> Dataset:
    """LEAF Shakespeare next-character prediction; groups are the speakers."""
    tensors = {}
    groups: NDArray[np.int64] | None = None
    for part in ("train", "test"):
        files = sorted((directory / part).glob("*.json"))
        if not files:
            raise DatasetError(f"{directory / part}: no LEAF *.json files")
        xs, ys, users = _read_leaf(files)
        if any(len(x) != sequence_length for x in xs):
            raise DatasetError(f"{directory / part}: every x must be {sequence_length} characters")
        tensors[part] = (torch.tensor(xs, dtype=torch.int64), torch.tensor(ys, dtype=torch.int64))
        if part == "train":
            names = {u: i for i, u in enumerate(dict.fromkeys(users))}
            groups = np.asarray([names[u] for u in users], dtype=np.int64)
    return Dataset(
        name="shakespeare",
        train_x=tensors["train"][0],
        train_y=tensors["train"][1],
        test_x=tensors["test"][0],
        test_y=tensors["test"][1],
        num_classes=len(SHAKESPEARE_LETTERS),
        train_groups=groups,
    )


def read_wav(path: Path) -> NDArray[np.float32]:
    """A 16 kHz mono 16-bit WAV as floats in [-1, 1], padded or cut to one second."""
    try:
        with wave.open(str(path), "rb") as handle:
            if (handle.getnchannels(), handle.getsampwidth()) != (1, 2):
                raise DatasetError(f"{path}: expected mono 16-bit PCM")
            if handle.getframerate() != SPEECH_SAMPLE_RATE:
                raise DatasetError(f"{path}: expected {SPEECH_SAMPLE_RATE} Hz")
            frames = handle.readframes(handle.getnframes())
    except (OSError, EOFError, wave.Error) as error:
        raise DatasetError(f"{path}: not a readable WAV file: {error}") from None
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    padded = np.zeros(SPEECH_SAMPLE_RATE, dtype=np.float32)
    padded[: min(samples.size, SPEECH_SAMPLE_RATE)] = samples[:SPEECH_SAMPLE_RATE]
    return padded


def log_mel(signals: NDArray[np.float32], mels: int = 40) -> NDArray[np.float32]:
    """Log-mel spectrograms (N, 1, mels, frames): 25 ms windows, 10 ms hop."""
    n_fft, hop = 400, 160
    spectrum = (
        torch.stft(
            torch.from_numpy(signals),
            n_fft,
            hop,
            window=torch.hann_window(n_fft),
            return_complex=True,
        ).abs()
        ** 2
    )
    frequencies = np.linspace(0, SPEECH_SAMPLE_RATE / 2, n_fft // 2 + 1)

    def to_mel(hz: NDArray[np.float64]) -> NDArray[np.float64]:
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    edges = np.linspace(0.0, float(to_mel(np.asarray(SPEECH_SAMPLE_RATE / 2))), mels + 2)
    mel_of_bin = to_mel(frequencies)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    bank = np.maximum(
        0.0,
        np.minimum(
            (mel_of_bin - lower) / (centre - lower), (upper - mel_of_bin) / (upper - centre)
        ),
    )
    features = torch.log(torch.from_numpy(bank.astype(np.float32)) @ spectrum + 1e-6)
    return features[:, None].numpy()


def load_speech_commands(directory: Path) -> Dataset:
    """Speech Commands keyword spotting; `testing_list.txt` is the held-out set."""
    words = sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if not words:
        raise DatasetError(f"{directory}: no word folders of WAV files")
    listed = directory / "testing_list.txt"
    testing = set(listed.read_text().split()) if listed.exists() else set()
    rows: dict[str, list[tuple[NDArray[np.float32], int, str]]] = {"train": [], "test": []}
    for label, word in enumerate(words):
        for path in sorted((directory / word).glob("*.wav")):
            relative = f"{word}/{path.name}"
            speaker = path.name.split("_nohash_")[0]
            rows["test" if relative in testing else "train"].append(
                (read_wav(path), label, speaker)
            )
    if not rows["train"] or not rows["test"]:
        raise DatasetError(
            f"{directory}: need training files and held-out files (testing_list.txt); got "
            f"{len(rows['train'])} and {len(rows['test'])}"
        )
    speakers = {s: i for i, s in enumerate(dict.fromkeys(s for *_, s in rows["train"]))}

    def tensors(part: str) -> tuple[torch.Tensor, torch.Tensor]:
        signals = np.stack([r[0] for r in rows[part]])
        labels = np.asarray([r[1] for r in rows[part]], dtype=np.int64)
        return torch.from_numpy(log_mel(signals)), torch.from_numpy(labels)

    train_x, train_y = tensors("train")
    test_x, test_y = tensors("test")
    return Dataset(
        name="speech-commands",
        train_x=train_x,
        train_y=train_y,
        test_x=test_x,
        test_y=test_y,
        num_classes=len(words),
        train_groups=np.asarray([speakers[s] for *_, s in rows["train"]], dtype=np.int64),
    )
