"""Local SGD at many sites at once.

Every selected site starts the round from the global model and takes `local_steps` steps of
plain SGD on minibatches of `batch_size` drawn (with replacement) from its own shard. All sites
take the same steps, so their parameters are stacked on a leading site axis and trained
together by one of three engines that compute the same thing:

- `grouped` (default where the model allows): k copies as one model (`powertrip.sim.grouped`);
- `vmap`: `torch.func.vmap(grad(loss))`, for any model without buffers (the LSTM);
- `loop`: site after site; the reference the others are tested and benchmarked against.

Shards are contiguous row ranges of the (reordered) training tensors: site j owns rows
`starts[j] .. starts[j] + sizes[j] - 1`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from powertrip.errors import InvalidValueError
from powertrip.sim.grouped import GroupedSequential, supports

TensorParams = dict[str, torch.Tensor]


class Engine(StrEnum):
    """How the sites of a round are trained together."""

    AUTO = "auto"
    GROUPED = "grouped"
    VMAP = "vmap"
    LOOP = "loop"


@dataclass(frozen=True)
class LocalTraining:
    """Settings of local training, the same at every site."""

    local_steps: int = 5
    batch_size: int = 32
    learning_rate: float = 0.05
    engine: Engine = Engine.AUTO

    def __post_init__(self) -> None:
        if self.local_steps < 1 or self.batch_size < 1:
            raise InvalidValueError("local_steps and batch_size must be >= 1")
        if not self.learning_rate > 0:
            raise InvalidValueError(f"learning_rate must be > 0, got {self.learning_rate}")


class BatchedTrainer:
    """Trains k copies of one model on k shards at once."""

    def __init__(self, model: nn.Module, settings: LocalTraining) -> None:
        self.model = model
        self.settings = settings
        engine = settings.engine
        if engine is Engine.AUTO:
            engine = Engine.GROUPED if supports(model) else Engine.VMAP
        if engine is Engine.GROUPED and not supports(model):
            raise InvalidValueError(f"engine 'grouped' cannot run {type(model).__name__}")
        self.engine = engine
        self._grouped = GroupedSequential(model) if engine is Engine.GROUPED else None  # type: ignore[arg-type]
        loss: Callable[..., torch.Tensor] = self._loss
        self._gradients = grad(loss)
        self._site_gradients = vmap(self._gradients)

    def _loss(self, params: TensorParams, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(self.model, params, (x,)), y)

    def _rows(
        self, starts: torch.Tensor, sizes: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """Row indices (k, batch) for one step: uniform within each site's shard."""
        # Draws come from a CPU generator (reproducible on any device), then move to the data.
        draws = torch.rand(starts.numel(), self.settings.batch_size, generator=generator)
        return starts[:, None] + (draws.to(starts.device) * sizes[:, None]).long()

    def train(
        self,
        global_params: Mapping[str, torch.Tensor],
        data_x: torch.Tensor,
        data_y: torch.Tensor,
        starts: torch.Tensor,
        sizes: torch.Tensor,
        generator: torch.Generator,
    ) -> TensorParams:
        """Parameters of every site after local training, stacked on a leading site axis."""
        k = starts.numel()
        steps = [self._rows(starts, sizes, generator) for _ in range(self.settings.local_steps)]
        if self._grouped is not None:
            leaves = self._grouped.replicate(global_params, k)
            return self._train_grouped(leaves, data_x, data_y, steps)
        stacked = {
            n: p.detach().unsqueeze(0).repeat(k, *[1] * p.dim()) for n, p in global_params.items()
        }
        if self.engine is Engine.VMAP:
            for rows in steps:
                gradients = self._site_gradients(stacked, data_x[rows], data_y[rows])
                torch._foreach_add_(list(stacked.values()), [gradients[n] for n in stacked],
                                    alpha=-self.settings.learning_rate)  # fmt: skip
            return stacked
        for site in range(k):
            params = {n: p[site] for n, p in stacked.items()}  # views: updated in place
            for rows in steps:
                gradients = self._gradients(params, data_x[rows[site]], data_y[rows[site]])
                torch._foreach_add_(list(params.values()), [gradients[n] for n in params],
                                    alpha=-self.settings.learning_rate)  # fmt: skip
        return stacked

    def _train_grouped(
        self,
        leaves: TensorParams,
        data_x: torch.Tensor,
        data_y: torch.Tensor,
        steps: list[torch.Tensor],
    ) -> TensorParams:
        assert self._grouped is not None
        tensors = [leaves[n].requires_grad_() for n in self._grouped.names]
        batch = self.settings.batch_size
        for rows in steps:
            x = data_x.index_select(0, rows.reshape(-1)).reshape(*rows.shape, *data_x.shape[1:])
            outputs = self._grouped.forward(leaves, x)
            # Sum over sites of each site's mean loss: site j's parameters get only its gradient.
            loss = (
                nn.functional.cross_entropy(
                    outputs.reshape(rows.numel(), -1), data_y[rows].reshape(-1), reduction="sum"
                )
                / batch
            )
            gradients = torch.autograd.grad(loss, tensors)
            with torch.no_grad():
                torch._foreach_add_(tensors, list(gradients), alpha=-self.settings.learning_rate)
        return self._grouped.model_layout(leaves)

    def train_one_batch(
        self, global_params: Mapping[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
    ) -> TensorParams:
        """One model, one big batch, `local_steps` steps: the throughput reference of the
        benchmark (the same samples without per-site parameters)."""
        params = {n: p.detach().clone() for n, p in global_params.items()}
        for _ in range(self.settings.local_steps):
            gradients = self._gradients(params, x, y)
            torch._foreach_add_(list(params.values()), [gradients[n] for n in params],
                                alpha=-self.settings.learning_rate)  # fmt: skip
        return params


def model_params(model: nn.Module) -> TensorParams:
    """A model's parameters by name, detached."""
    return {name: p.detach() for name, p in model.named_parameters()}


def accuracy(
    model: nn.Module, params: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor
) -> float:
    """Fraction of (x, y) classified correctly by `model` with `params`, in chunks."""
    correct = 0
    with torch.no_grad():
        for start in range(0, x.shape[0], 4096):
            logits = functional_call(model, dict(params), (x[start : start + 4096],))
            correct += int((logits.argmax(dim=1) == y[start : start + 4096]).sum())
    return correct / max(1, x.shape[0])
