"""The simulator end to end: simulated time is Eq.7, runs are deterministic, baselines select
what they claim, and results survive interruption."""

import json
from pathlib import Path

import numpy as np
import pytest

from powertrip.model.equations import communication_time_s
from powertrip.model.sites import SiteTable
from powertrip.sim.experiment import ExperimentError
from powertrip.sim.power import ConstantPower
from powertrip.sim.runner import ResultsStore, RunSpec, World, WorldBuilder, plan_runs, run_one
from powertrip.sim.world import SiteData
from powertrip.tasks import load_task
from support import tiny_experiment


def three_site_world() -> World:
    """Three sites with known links and power 1.0 / 0.5 / 0.25, on the digits data."""
    dataset = load_task("digits")
    sites = SiteTable.from_arrays(
        ["near", "mid", "far"],
        distance_km=[100.0, 2000.0, 8000.0],
        bandwidth_bytes_per_s=[1e9, 5e8, 1e8],
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=1.0,
    )
    shards = np.array_split(np.arange(dataset.train_y.numel()), 3)
    data = SiteData.from_shards(dataset.train_x, dataset.train_y, shards)
    return World(sites, ConstantPower(np.array([1.0, 0.5, 0.25])), data, dataset)


def test_simulated_round_time_is_eq7_by_hand() -> None:
    """Round time = max_i (T_0 / a_i + d_i / c + S / B_i): here the far, weak site's
    10 / 0.25 + 0.04 + 10 = 50.04 s, not the sum nor the slowest compute alone."""
    world = three_site_world()
    experiment = tiny_experiment(max_rounds=2, target_accuracy=1.0)
    record = run_one(experiment, RunSpec("all", {"name": "all"}, 0, 1e9), world)
    by_hand = max(
        10 / a + d * 1000 / 2e8 + 1e9 / b
        for a, d, b in ((1.0, 100, 1e9), (0.5, 2000, 5e8), (0.25, 8000, 1e8))
    )
    assert by_hand == pytest.approx(50.04)
    for entry in record["round_log"]:
        assert entry["round_time_s"] == pytest.approx(by_hand)
        assert entry["compute_time_s"] == pytest.approx(40.0)
        assert entry["communication_time_s"] == pytest.approx(10.04)
    assert record["round_log"][-1]["end_time_s"] == pytest.approx(2 * by_hand)
    expected_comm = communication_time_s([8000.0], [1e8], 1e9)[0]
    assert entry["communication_time_s"] == pytest.approx(expected_comm)


def test_centralized_trains_one_capped_site_on_all_data() -> None:
    """Centralized uses exactly one site every round, at its cap: T_0 / 0.25 + its link."""
    world = three_site_world()
    experiment = tiny_experiment(max_rounds=3, target_accuracy=1.0)
    spec = RunSpec("c", {"name": "centralized", "power_cap_ratio": 0.25}, 0, 1e9)
    record = run_one(experiment, spec, world)
    assert all(entry["selected"] == ["near"] for entry in record["round_log"])
    assert record["round_log"][0]["round_time_s"] == pytest.approx(10 / 0.25 + 0.0005 + 1.0)
    assert record["final_accuracy"] > record["initial_accuracy"]


def test_fixed_radius_uses_exactly_the_sites_inside() -> None:
    """Fixed radius 2500 km selects near and mid, every round, and never far."""
    spec = RunSpec("r", {"name": "fixed-radius", "radius_km": 2500}, 0, 1e9)
    record = run_one(tiny_experiment(max_rounds=3), spec, three_site_world())
    assert all(entry["selected"] == ["near", "mid"] for entry in record["round_log"])


def test_same_seed_gives_identical_results(tmp_path: Path) -> None:
    """Two runs of one experiment write byte-identical results (accuracy included)."""
    experiment = tiny_experiment(
        policies=[{"name": "powertrip", "initial_sites": 2}, {"name": "random-k", "k": 3}],
        static_optimal={"k_min": 2, "k_step": 2},
        power={"mode": "uniform"},
        task={"name": "digits", "model": "mlp", "partition": "dirichlet", "dirichlet_alpha": 1.0},
    )
    documents = []
    for folder in ("a", "b"):
        store = ResultsStore(tmp_path / folder, experiment)
        builder = WorldBuilder(experiment, tmp_path / "cache")
        for spec in plan_runs(experiment):
            store.add(run_one(experiment, spec, builder.world(spec.seed)))
        documents.append(store.path.read_text())
    assert documents[0] == documents[1]
    runs = json.loads(documents[0])["runs"]
    assert [r["label"] for r in runs] == [
        "powertrip initial_sites=2", "random-k k=3", "sweep k=2", "sweep k=4", "sweep k=6",
    ]  # fmt: skip
    assert runs[0]["round_log"][0]["accuracy"] > 0


def test_results_store_resumes_and_refuses_another_experiment(tmp_path: Path) -> None:
    """Finished runs are kept and skipped on resume; another experiment's folder is refused."""
    experiment = tiny_experiment()
    store = ResultsStore(tmp_path, experiment)
    store.add({"label": "all", "seed": 0, "update_size_bytes": 1.5e9, "runs": "stub"})
    resumed = ResultsStore(tmp_path, experiment)
    assert resumed.done() == {("all", 0, 1.5e9)}
    other = tiny_experiment(max_rounds=9)
    with pytest.raises(ExperimentError, match=r"different experiment.*nothing was overwritten"):
        ResultsStore(tmp_path, other)
    assert json.loads((tmp_path / "results.json").read_text())["runs"][0]["runs"] == "stub"


def test_trace_power_varies_over_time(tmp_path: Path) -> None:
    """In trace mode, site availability follows the (synthetic) traces and changes with time."""
    experiment = tiny_experiment(power={"mode": "trace", "trace_source": "synthetic"})
    world = WorldBuilder(experiment, tmp_path).world(0)
    early, late = world.power.availability(0.0), world.power.availability(6 * 3600.0)
    assert early.shape == (6,)
    assert ((early > 0) & (early < 0.6)).all()  # spare power = 1 - (0.49..0.74 utilisation)
    assert not np.array_equal(early, late)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"task": {"name": "imagenet"}}, "task: Value error, unknown task 'imagenet'"),
        ({"task": {"name": "digits", "model": "lstm"}}, "has no model 'lstm'; valid: cnn, mlp"),
        ({"task": {"dirichlet_alpha": 0}}, "task.dirichlet_alpha: Input should be greater"),
        ({"policies": [{"name": "static-k"}]}, "policies\\[0\\]: policy 'static-k' needs"),
        ({"policies": [{"name": "warp"}]}, "valid policies: powertrip"),
        ({"sites": {"count": 0}}, "sites.count"),
        ({"update_sizes": ["huge"]}, "update size 'huge' is not a size"),
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"seeds": 0}, "seeds must be a count"),
    ],
)
def test_invalid_experiments_name_the_field(override: dict[str, object], message: str) -> None:
    """Every invalid field is reported with its path."""
    with pytest.raises(ExperimentError, match=message):
        tiny_experiment(**override)
