"""Dataset readers on tiny fixtures written in the real formats."""

import gzip
import json
import struct
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from powertrip.sim.training import BatchedTrainer, LocalTraining, model_params
from powertrip.tasks import DatasetError, build_model, load_task
from powertrip.tasks.files import read_idx


def write_idx(path: Path, array: np.ndarray) -> None:
    """An IDX file: zero, zero, type code, dimension count, big-endian sizes, then data."""
    codes = {np.dtype(np.uint8): 0x08}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + b"".join(
        struct.pack(">I", size) for size in array.shape
    )
    data = header + array.tobytes()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


@pytest.fixture
def emnist_dir(tmp_path: Path) -> Path:
    """A 'letters' split (labels from 1) with 40 train and 10 test images."""
    rng = np.random.default_rng(0)
    for part, count in (("train", 40), ("test", 10)):
        images = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        labels = rng.integers(1, 5, count).astype(np.uint8)
        labels[:4] = [1, 2, 3, 4]
        write_idx(tmp_path / f"emnist-letters-{part}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"emnist-letters-{part}-labels-idx1-ubyte", labels)
    return tmp_path


def trains(task: str, model: str, data_dir: Path, **kwargs: str) -> None:
    """The task loads, its model builds, and one grouped/vmapped round changes the model."""
    dataset = load_task(task, data_dir, **kwargs)
    net = build_model(task, model, dataset, seed=0)
    params = model_params(net)
    trained = BatchedTrainer(net, LocalTraining(local_steps=1, batch_size=2)).train(
        params, dataset.train_x, dataset.train_y, torch.tensor([0, 2]), torch.tensor([2, 2]),
        torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert any(not torch.equal(trained[n][0], p) for n, p in params.items())


def test_emnist_idx(emnist_dir: Path) -> None:
    """IDX images and labels (gzip or not) load transposed, labels shifted to start at 0."""
    dataset = load_task("emnist", emnist_dir, split="letters")
    assert dataset.train_x.shape == (40, 1, 28, 28)
    assert dataset.test_x.shape == (10, 1, 28, 28)
    assert dataset.num_classes == 4
    assert int(dataset.train_y.min()) == 0
    raw = read_idx(emnist_dir / "emnist-letters-train-images-idx3-ubyte.gz")
    assert float(dataset.train_x[0, 0, 3, 5]) == pytest.approx(raw[0, 5, 3] / 255)
    trains("emnist", "cnn", emnist_dir, split="letters")


def test_emnist_errors_name_the_file(tmp_path: Path, emnist_dir: Path) -> None:
    """A missing file or a truncated IDX file is named in the error."""
    with pytest.raises(DatasetError, match="missing emnist-balanced-train-images"):
        load_task("emnist", emnist_dir)
    broken = tmp_path / "broken-idx"
    write_idx(broken, np.zeros((2, 3), np.uint8))
    broken.write_bytes(broken.read_bytes()[:-1])
    with pytest.raises(DatasetError, match="header promises"):
        read_idx(broken)
    (tmp_path / "junk").write_bytes(b"\x01\x02\x03")
    with pytest.raises(DatasetError, match="not an IDX file"):
        read_idx(tmp_path / "junk")


def leaf(users: dict[str, list[tuple[str, str]]]) -> str:
    """A LEAF JSON document."""
    return json.dumps({
        "users": list(users),
        "num_samples": [len(v) for v in users.values()],
        "user_data": {
            u: {"x": [x for x, _ in v], "y": [y for _, y in v]} for u, v in users.items()
        },
    })  # fmt: skip


def test_shakespeare_leaf_json(tmp_path: Path) -> None:
    """LEAF JSON loads as character indices, with the speaker as each sample's group."""
    line = "To be, or not to be, that is the question: Whether 'tis nobler in the mind to su"
    assert len(line) == 80
    for part in ("train", "test"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "all_data_0.json").write_text(
            leaf({"HAMLET": [(line, "u"), (line[::-1], "T")], "OPHELIA": [(line, "f")]})
        )
    dataset = load_task("shakespeare", tmp_path)
    assert dataset.train_x.shape == (3, 80)
    assert dataset.train_groups is not None
    assert dataset.train_groups.tolist() == [0, 0, 1]
    trains("shakespeare", "lstm", tmp_path)
    (tmp_path / "train" / "all_data_0.json").write_text('{"users": []}')
    with pytest.raises(DatasetError, match=r"all_data_0\.json: not a LEAF JSON file"):
        load_task("shakespeare", tmp_path)


def write_wav(path: Path, frequency: float, rate: int = 16_000) -> None:
    """A one-second 16-bit mono tone."""
    t = np.arange(rate) / rate
    samples = (0.3 * np.sin(2 * np.pi * frequency * t) * 32767).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples.tobytes())


def test_speech_commands_folder(tmp_path: Path) -> None:
    """Word folders of WAVs become log-mel features; testing_list.txt is held out."""
    for word, tone in (("yes", 300.0), ("no", 900.0)):
        for speaker in ("aa11", "bb22", "cc33"):
            write_wav(tmp_path / word / f"{speaker}_nohash_0.wav", tone)
    (tmp_path / "testing_list.txt").write_text("yes/cc33_nohash_0.wav\nno/cc33_nohash_0.wav\n")
    dataset = load_task("speech-commands", tmp_path)
    assert dataset.train_x.shape == (4, 1, 40, 101)
    assert dataset.test_x.shape[0] == 2
    assert dataset.num_classes == 2
    assert dataset.train_groups is not None
    assert sorted(set(dataset.train_groups.tolist())) == [0, 1]
    trains("speech-commands", "cnn", tmp_path)
    write_wav(tmp_path / "yes" / "dd44_nohash_0.wav", 300.0, rate=8000)
    with pytest.raises(DatasetError, match=r"dd44_nohash_0\.wav: expected 16000 Hz"):
        load_task("speech-commands", tmp_path)


def test_unknown_task_and_missing_data_dir(tmp_path: Path) -> None:
    """Unknown tasks list the valid ones; file tasks need an existing data_dir."""
    with pytest.raises(DatasetError, match="valid tasks: mnist, digits"):
        load_task("imagenet")
    with pytest.raises(DatasetError, match="set its data_dir"):
        load_task("emnist")
    with pytest.raises(DatasetError, match="does not exist"):
        load_task("emnist", tmp_path / "nowhere")


def test_offline_datasets() -> None:
    """The offline tasks hold real digits with a fixed stratified held-out split."""
    mnist = load_task("mnist")
    assert (mnist.train_x.shape[0], mnist.test_x.shape[0]) == (4000, 1000)
    assert torch.bincount(mnist.test_y).tolist() == [100] * 10
    assert float(mnist.train_x.min()) >= 0.0
    assert float(mnist.train_x.max()) <= 1.0
    digits = load_task("digits")
    assert digits.train_x.shape[1:] == (1, 8, 8)
