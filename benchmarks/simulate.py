"""Simulator throughput: 100 sites x 20 rounds of real training of the default model.

Measured in one run, on the default task (MNIST-5k, MLP, 5 local steps of batch 32):
- the simulator itself (`run_one`, policy `all`, so every round trains all 100 sites), with
  the time inside local training separated from everything else (selection, aggregation,
  evaluation, bookkeeping);
- the same samples trained as one big batch by one model (3,200 samples a step, the same
  steps): the reference for the model's throughput on this machine;
- the same sites trained one after another (the `loop` engine) for a few rounds.
Last line: `simulate_vs_bigbatch=<training throughput / big-batch throughput>`.
"""

from __future__ import annotations

import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import torch

from powertrip.sim.experiment import parse_experiment
from powertrip.sim.runner import RunSpec, WorldBuilder, run_one
from powertrip.sim.training import BatchedTrainer, Engine, LocalTraining, model_params
from powertrip.tasks import build_model

SITES, ROUNDS = 100, 20


class TrainingTimer:
    """Adds up the wall time and samples of every `BatchedTrainer.train` call while active."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.samples = 0
        self._original = BatchedTrainer.train

    def __enter__(self) -> TrainingTimer:
        def timed(trainer: BatchedTrainer, *args: Any) -> Any:
            start = time.perf_counter()
            result = self._original(trainer, *args)
            self.seconds += time.perf_counter() - start
            steps = trainer.settings.local_steps * trainer.settings.batch_size
            self.samples += args[3].numel() * steps
            return result

        BatchedTrainer.train = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        BatchedTrainer.train = self._original  # type: ignore[method-assign]


def main() -> None:
    """Run the three measurements and print the ratios, the headline last."""
    torch.manual_seed(0)
    experiment = parse_experiment(
        {
            "sites": {"count": SITES},
            "policies": [{"name": "all"}],
            "seeds": 1,
            "target_accuracy": 1.0,
            "max_rounds": ROUNDS,
        },
        "benchmark",
    )
    task = experiment.task
    with TemporaryDirectory() as cache:
        world = WorldBuilder(experiment, Path(cache)).world(0)
        with TrainingTimer() as timer:
            start = time.perf_counter()
            record = run_one(experiment, RunSpec("all", {"name": "all"}, 0, 1.5e9), world)
            total_s = time.perf_counter() - start

    assert record["rounds"] == ROUNDS
    training_s, samples = timer.seconds, timer.samples
    simulate_rate = samples / training_s
    outside_share = (total_s - training_s) / total_s

    model = build_model(task.name, task.model, world.dataset, seed=0)
    settings = LocalTraining(task.local_steps, task.batch_size, task.learning_rate)
    params = model_params(model)
    big = SITES * task.batch_size
    x, y = world.data.train_x[:big], world.data.train_y[:big]
    trainer = BatchedTrainer(model, settings)
    trainer.train_one_batch(params, x, y)
    start = time.perf_counter()
    for _ in range(ROUNDS):
        trainer.train_one_batch(params, x, y)
    big_rate = ROUNDS * task.local_steps * big / (time.perf_counter() - start)

    looping = BatchedTrainer(
        model, LocalTraining(task.local_steps, task.batch_size, engine=Engine.LOOP)
    )
    starts, sizes = world.data.starts, world.data.sizes
    loop_rounds = 3
    start = time.perf_counter()
    for r in range(loop_rounds):
        looping.train(params, world.data.train_x, world.data.train_y, starts, sizes,
                      torch.Generator().manual_seed(r))  # fmt: skip
    loop_rate = loop_rounds * task.local_steps * big / (time.perf_counter() - start)

    print(f"simulator: {ROUNDS} rounds x {SITES} sites in {total_s:.2f} s, "
          f"final accuracy {record['final_accuracy']:.3f}")  # fmt: skip
    print(
        f"training engine {BatchedTrainer(model, settings).engine}: {simulate_rate:,.0f} samples/s"
    )
    print(f"one big batch ({big} samples/step): {big_rate:,.0f} samples/s")
    print(f"site-by-site loop: {loop_rate:,.0f} samples/s")
    print(f"share of run time outside training: {outside_share:.1%}")
    print(f"simulate_vs_loop={simulate_rate / loop_rate:.2f}")
    print(f"simulate_vs_bigbatch={simulate_rate / big_rate:.3f}")


if __name__ == "__main__":
    main()
