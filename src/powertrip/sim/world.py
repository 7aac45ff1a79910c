"""The simulated world of one seed: sites, their power over time, their data, and the simulated
`ProfileSource`, `SiteClient` and `Evaluator` the shared round loop runs against.

Time: a round at the selected sites takes Eq.7, max_i (T_0 / a_i + T_comm,i), with a_i the
availability at the round's start (capped for the centralized baseline) and T_comm,i Eq.3 for
the emulated update size; the simulated clock advances by it (by the deadline, if one is set
and a site would miss it; such sites are reported late and left out of the average).
Training is real: the selected sites' local SGD runs on their shards (`BatchedTrainer`).
The centralized baseline's single site stands for one datacenter holding all the data: it
trains on the whole training set (the union of the shards), at its capped power.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from powertrip.fl.params import Params
from powertrip.model.equations import communication_time_s
from powertrip.model.sites import SiteTable
from powertrip.rounds import Deliver, SimulatedClock, SiteReport, SiteStatus, TrainRequest
from powertrip.sim.power import PowerSource
from powertrip.sim.training import BatchedTrainer, accuracy


@dataclass(frozen=True, eq=False)
class SiteData:
    """Training data reordered so that each site's shard is one contiguous row range."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    starts: torch.Tensor
    sizes: torch.Tensor

    @classmethod
    def from_shards(
        cls, train_x: torch.Tensor, train_y: torch.Tensor, shards: Sequence[np.ndarray]
    ) -> SiteData:
        """Gather the shards (row indices per site) into contiguous ranges."""
        order = torch.from_numpy(np.concatenate(shards).astype(np.int64))
        sizes = torch.tensor([len(s) for s in shards], dtype=torch.int64)
        starts = torch.cumsum(sizes, 0) - sizes
        return cls(train_x[order].contiguous(), train_y[order].contiguous(), starts, sizes)


class SimulatedProfiles:
    """Candidates at time t: every site with power then, with its current availability."""

    def __init__(self, sites: SiteTable, power: PowerSource) -> None:
        self.sites = sites
        self.power = power

    def sites_at(self, time_s: float) -> SiteTable:
        """The sites with availability > 0 at `time_s`."""
        availability = self.power.availability(time_s)
        powered = np.flatnonzero(availability > 0)
        table = self.sites if powered.size == len(self.sites) else self.sites.take(powered)
        return table.with_power(availability[powered])


class SimulatedSites:
    """Trains the selected sites for real and advances the simulated clock by Eq.7."""

    def __init__(
        self,
        profiles: SimulatedProfiles,
        data: SiteData,
        trainer: BatchedTrainer,
        clock: SimulatedClock,
        base_compute_time_s: float,
        update_size_bytes: float,
        transfers_per_round: int,
        seed: int,
    ) -> None:
        self.profiles = profiles
        self.data = data
        self.trainer = trainer
        self.clock = clock
        self.base_compute_time_s = base_compute_time_s
        self.update_size_bytes = update_size_bytes
        self.transfers_per_round = transfers_per_round
        self.seed = seed
        self._shard = {site_id: i for i, site_id in enumerate(profiles.sites.site_ids)}

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Train every selected site that finishes in time; advance the clock by the round."""
        candidates = self.profiles.sites_at(self.clock.now())
        row = {site_id: i for i, site_id in enumerate(candidates.site_ids)}
        rows = np.asarray([row[s] for s in request.site_ids], dtype=np.int64)
        power = candidates.power_available_ratio[rows]
        if request.power_cap_ratio is not None:
            power = np.minimum(power, request.power_cap_ratio)
        compute_s = self.base_compute_time_s / power
        comm_s = communication_time_s(
            candidates.distance_km[rows],
            candidates.bandwidth_bytes_per_s[rows],
            self.update_size_bytes,
            self.transfers_per_round,
        )
        total_s = compute_s + comm_s
        deadline = request.deadline_s
        on_time = total_s <= deadline if deadline is not None else np.ones(rows.size, bool)

        shards = torch.tensor([self._shard[s] for s in request.site_ids], dtype=torch.int64)
        chosen = torch.from_numpy(np.flatnonzero(on_time))
        sizes = self.data.sizes[shards]
        if request.centralized:
            sizes = torch.full_like(sizes, int(self.data.sizes.sum()))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + request.round_index)
        trained = (
            self.trainer.train(
                {n: torch.tensor(v) for n, v in request.global_params.items()},
                self.data.train_x,
                self.data.train_y,
                torch.zeros_like(chosen)
                if request.centralized
                else self.data.starts[shards[chosen]],
                sizes[chosen],
                generator,
            )
            if chosen.numel()
            else {}
        )
        self.clock.advance(float(total_s.max()) if on_time.all() else float(deadline or 0.0))

        position = {int(site): j for j, site in enumerate(chosen)}
        for i, site_id in enumerate(request.site_ids):
            report = SiteReport(
                site_id=site_id,
                status=SiteStatus.OK,
                compute_time_s=float(compute_s[i]),
                communication_time_s=float(comm_s[i]),
                power_available_ratio=float(power[i]),
            )
            if on_time[i]:
                j = position[i]
                report = dataclasses.replace(
                    report,
                    num_samples=int(sizes[i]),
                    update={n: t[j].numpy() for n, t in trained.items()},
                )
            else:
                message = f"needs {total_s[i]:.1f} s, deadline {deadline} s"
                report = dataclasses.replace(report, status=SiteStatus.LATE, message=message)
            deliver(report)


class TorchEvaluator:
    """Accuracy of numpy parameters on the held-out tensors."""

    def __init__(self, model: nn.Module, test_x: torch.Tensor, test_y: torch.Tensor) -> None:
        self.model = model
        self.test_x = test_x
        self.test_y = test_y

    def accuracy(self, params: Params) -> float:
        """Fraction of held-out samples classified correctly."""
        return accuracy(self.model, _tensors(params), self.test_x, self.test_y)


def _tensors(params: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in params.items()}
