"""Local training engines: grouped, vmap and the per-site loop compute the same thing."""

import pytest
import torch
from torch import nn

from powertrip.sim.grouped import supports
from powertrip.sim.training import BatchedTrainer, Engine, LocalTraining, model_params
from powertrip.tasks.models import MLP, CharLSTM, SmallCNN


@pytest.mark.parametrize("model", [MLP(64, 16, 10), SmallCNN(1, 8, 8, 10)], ids=["mlp", "cnn"])
@pytest.mark.parametrize("engine", [Engine.GROUPED, Engine.VMAP])
def test_batched_engines_match_the_site_by_site_loop(model: nn.Module, engine: Engine) -> None:
    """Same random draws, same parameters after local SGD, whatever the engine."""
    torch.manual_seed(0)
    x = torch.randn(120, 1, 8, 8)
    y = torch.randint(0, 10, (120,))
    starts, sizes = torch.tensor([0, 30, 70]), torch.tensor([30, 40, 50])
    params = model_params(model)
    settings = LocalTraining(local_steps=3, batch_size=8, learning_rate=0.1)
    reference = BatchedTrainer(model, LocalTraining(3, 8, 0.1, Engine.LOOP)).train(
        params, x, y, starts, sizes, torch.Generator().manual_seed(5)
    )
    batched = BatchedTrainer(model, LocalTraining(3, 8, 0.1, engine)).train(
        params, x, y, starts, sizes, torch.Generator().manual_seed(5)
    )
    for name, value in reference.items():
        assert value.shape == (3, *params[name].shape)
        torch.testing.assert_close(batched[name], value, rtol=1e-4, atol=1e-5)
    assert settings.engine is Engine.AUTO
    # Sites trained on different shards end up different; the global model is untouched.
    assert not torch.equal(reference[name][0], reference[name][1])
    assert all(torch.equal(params[n], p) for n, p in model_params(model).items())


def test_sites_only_see_their_own_shard() -> None:
    """A site whose shard is all one label learns that label, the other site the other."""
    model = MLP(4, 8, 2)
    x = torch.ones(20, 4)
    y = torch.cat([torch.zeros(10, dtype=torch.int64), torch.ones(10, dtype=torch.int64)])
    trained = BatchedTrainer(model, LocalTraining(20, 4, 0.5)).train(
        model_params(model), x, y, torch.tensor([0, 10]), torch.tensor([10, 10]),
        torch.Generator().manual_seed(0),
    )  # fmt: skip
    for site, label in ((0, 0), (1, 1)):
        params = {n: p[site] for n, p in trained.items()}
        logits = torch.func.functional_call(model, params, (x[:1],))
        assert int(logits.argmax()) == label


def test_auto_engine_and_grouped_support() -> None:
    """Sequential models of supported layers train grouped; others (the LSTM) by vmap."""
    assert BatchedTrainer(MLP(4, 4, 2), LocalTraining()).engine is Engine.GROUPED
    assert BatchedTrainer(CharLSTM(10), LocalTraining()).engine is Engine.VMAP
    assert not supports(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Linear(2, 2)))
    assert not supports(nn.Sequential(nn.Linear(2, 2), nn.Tanh()))
    with pytest.raises(ValueError, match="grouped"):
        BatchedTrainer(CharLSTM(10), LocalTraining(engine=Engine.GROUPED))


def test_settings_are_checked() -> None:
    """Steps, batch size and learning rate must be positive."""
    with pytest.raises(ValueError, match="local_steps"):
        LocalTraining(local_steps=0)
    with pytest.raises(ValueError, match="learning_rate"):
        LocalTraining(learning_rate=0)
