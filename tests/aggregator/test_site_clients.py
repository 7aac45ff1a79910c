"""One contract suite for every SiteClient: in-process workers and gRPC site servers."""

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from powertrip.aggregator.clock import WallClock
from powertrip.aggregator.site_clients import GrpcSiteClient, InProcessSiteClient, JobTraining
from powertrip.model.sites import SiteTable
from powertrip.rounds import (
    JobSettings,
    RoundLoop,
    SiteClient,
    SiteReport,
    SiteStatus,
    TrainRequest,
)
from powertrip.selection import AllSites
from powertrip.sim.world import TorchEvaluator
from powertrip.site.power import ConstantPowerSource
from powertrip.site.worker import ShardSpec, SiteWorker
from powertrip.tasks import build_model, load_task
from support import serve

SITES = ("site-0", "site-1", "site-2")
TRAINING = JobTraining(job_id="contract", local_steps=2, batch_size=16, learning_rate=0.1, seed=5)


def make_worker(index: int, stop: threading.Event, slow: bool = False) -> SiteWorker:
    """A digits worker; a slow one claims 100 s of compute at 50% power and waits 100 s."""
    ticks = iter([0.0, 100.0] * 10)
    return SiteWorker(
        ShardSpec(task="digits", model="mlp", seed=1, index=index, count=3, partition="iid"),
        ConstantPowerSource(0.5 if slow else 1.0, 2800.0),
        clock=(lambda: next(ticks)) if slow else __import__("time").perf_counter,
        stop=stop,
    )


@dataclass
class Harness:
    """A SiteClient under test and the global model its sites expect."""

    client: InProcessSiteClient | GrpcSiteClient
    reference: dict[str, np.ndarray]


@pytest.fixture(params=["in-process", "grpc"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """Three sites (site-2 slow) behind the client kind of the parameter."""
    stop = threading.Event()
    workers = {s: make_worker(i, stop, slow=(s == "site-2")) for i, s in enumerate(SITES)}
    reference = dict(workers["site-0"].reference)
    if request.param == "in-process":
        client: InProcessSiteClient | GrpcSiteClient = InProcessSiteClient(workers, TRAINING)
        yield Harness(client, reference)
        stop.set()
        client.close()
        return
    servers, addresses = serve(workers)
    client = GrpcSiteClient(lambda: addresses, TRAINING)
    yield Harness(client, reference)
    stop.set()
    client.close()
    for server in servers:
        server.stop(grace=None).wait(5)


def collect(client: SiteClient, round_request: TrainRequest) -> list[SiteReport]:
    """The reports a client delivers for one round (a copy: late deliveries come after)."""
    reports: list[SiteReport] = []
    client.train(round_request, reports.append)
    return list(reports)


def request(
    sites: tuple[str, ...], params: dict[str, np.ndarray], deadline: float | None = 30.0
) -> TrainRequest:
    """A round's request."""
    return TrainRequest(round_index=1, site_ids=sites, global_params=params, deadline_s=deadline)


def test_selected_sites_train_and_report(harness: Harness) -> None:
    """Every selected site returns an OK update of the model's tensors and its sample count."""
    reports = {r.site_id: r for r in collect(harness.client, request(SITES[:2], harness.reference))}
    assert set(reports) == {"site-0", "site-1"}
    for report in reports.values():
        assert report.status is SiteStatus.OK
        assert report.num_samples > 400
        assert report.update is not None
        assert sorted(report.update) == sorted(harness.reference)
        assert report.compute_time_s > 0


def test_a_site_past_the_deadline_is_late_and_the_rest_report(harness: Harness) -> None:
    """The slow site is reported LATE at the deadline; the others are OK."""
    reports = {
        r.site_id: r for r in collect(harness.client, request(SITES, harness.reference, 5.0))
    }
    assert reports["site-2"].status is SiteStatus.LATE
    assert reports["site-0"].status is reports["site-1"].status is SiteStatus.OK


def test_a_model_that_does_not_fit_is_rejected(harness: Harness) -> None:
    """A global model of the wrong shape is refused by the site: REJECTED, not OK."""
    bad = {**harness.reference, next(iter(harness.reference)): np.zeros((1, 1), np.float32)}
    (report,) = collect(harness.client, request(("site-0",), bad))
    assert report.status is SiteStatus.REJECTED
    assert report.update is None


def test_an_unknown_site_fails(harness: Harness) -> None:
    """A site the client cannot reach is FAILED, with a reason."""
    (report,) = collect(harness.client, request(("site-9",), harness.reference))
    assert report.status is SiteStatus.FAILED
    assert report.message


@pytest.mark.parametrize("buffered_updates", [1.0, 0.0, None], ids=["budget", "spooled", "memory"])
def test_grpc_and_in_process_updates_are_identical(buffered_updates: float | None) -> None:
    """The transport changes nothing: the same round gives bit-identical updates, whether
    they are received in memory or spooled to files beyond the memory budget."""
    stop = threading.Event()
    workers = {s: make_worker(i, stop) for i, s in enumerate(SITES[:2])}
    reference = dict(workers["site-0"].reference)
    local = InProcessSiteClient(workers, TRAINING)
    servers, addresses = serve(workers)
    remote = GrpcSiteClient(lambda: addresses, TRAINING, buffered_updates=buffered_updates)
    try:
        a = {r.site_id: r for r in collect(local, request(SITES[:2], reference))}
        b = {r.site_id: r for r in collect(remote, request(SITES[:2], reference))}
        for site in SITES[:2]:
            local_update, remote_update = a[site].update, b[site].update
            assert local_update is not None
            assert remote_update is not None
            for name, value in local_update.items():
                np.testing.assert_array_equal(remote_update[name], value)
    finally:
        remote.close()
        local.close()
        for server in servers:
            server.stop(grace=None).wait(5)


def test_round_loop_over_grpc_sites_improves_the_model() -> None:
    """The shared round loop, run against gRPC sites on a wall clock, trains the model."""
    stop = threading.Event()
    workers = {s: make_worker(i, stop) for i, s in enumerate(SITES)}
    servers, addresses = serve(workers)
    table = SiteTable.from_arrays(
        SITES, distance_km=[10.0, 20.0, 30.0], bandwidth_bytes_per_s=1e9, gpus=4,
        gpu_power_w=700.0, power_available_ratio=1.0,
    )  # fmt: skip

    class StaticProfiles:
        def sites_at(self, time_s: float) -> SiteTable:
            return table

    dataset = load_task("digits")
    model = build_model("digits", "mlp", dataset, seed=1)
    training = JobTraining(job_id="loop", local_steps=30, batch_size=32, learning_rate=0.1)
    client = GrpcSiteClient(lambda: addresses, training)
    loop = RoundLoop(
        AllSites(), StaticProfiles(), client, TorchEvaluator(model, dataset.test_x, dataset.test_y),
        WallClock(), JobSettings(update_size_bytes=1e6, target_accuracy=0.99, max_rounds=3),
    )  # fmt: skip
    try:
        state = loop.run(loop.start(workers["site-0"].reference))
    finally:
        client.close()
        for server in servers:
            server.stop(grace=None).wait(5)
    assert len(state.records) == 3
    assert all(set(r.completed_site_ids) == set(SITES) for r in state.records)
    assert state.records[-1].accuracy > state.initial_accuracy + 0.2
    assert all(r.round_time_s > 0 for r in state.records)
