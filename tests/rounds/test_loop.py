"""The shared round loop against fake sites: aggregation, drops, rejections, time, stop rule."""

import numpy as np
import pytest

from powertrip.model.sites import SiteTable
from powertrip.rounds import (
    Deliver,
    JobSettings,
    RoundFold,
    RoundLoop,
    SimulatedClock,
    SiteReport,
    SiteStatus,
    TrainRequest,
)
from powertrip.selection import AllSites, Centralized

GLOBAL = {"w": np.array([0.0, 0.0], np.float32)}


class FixedProfiles:
    """Three sites with fixed profiles."""

    def __init__(self) -> None:
        self.table = SiteTable.from_arrays(
            ["a", "b", "c"],
            distance_km=[10.0, 20.0, 30.0],
            bandwidth_bytes_per_s=1e9,
            gpus=1,
            gpu_power_w=300.0,
            power_available_ratio=[1.0, 0.5, 0.25],
        )

    def sites_at(self, time_s: float) -> SiteTable:
        return self.table


class ScriptedSites:
    """Returns scripted reports per site and advances the clock by a fixed round time."""

    def __init__(self, clock: SimulatedClock, reports: dict[str, SiteReport]) -> None:
        self.clock = clock
        self.reports = reports
        self.requests: list[TrainRequest] = []

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        self.requests.append(request)
        self.clock.advance(10.0)
        for site in request.site_ids:
            if site in self.reports:
                deliver(self.reports[site])


class MeanEvaluator:
    """'Accuracy' = mean of w, so a test can see exactly what was aggregated."""

    def accuracy(self, params: dict[str, np.ndarray]) -> float:
        return float(np.mean(params["w"]))


def ok(site: str, value: float, samples: int) -> SiteReport:
    """A good report whose update is `value` everywhere."""
    return SiteReport(
        site,
        SiteStatus.OK,
        num_samples=samples,
        update={"w": np.full(2, value, np.float32)},
        compute_time_s=value,
        communication_time_s=1.0,
    )


def loop_with(
    reports: dict[str, SiteReport], policy: object = None
) -> tuple[RoundLoop, ScriptedSites]:
    """A loop over the three fixed sites with scripted reports."""
    clock = SimulatedClock()
    sites = ScriptedSites(clock, reports)
    settings = JobSettings(update_size_bytes=1e9, target_accuracy=0.99, max_rounds=3)
    loop = RoundLoop(policy or AllSites(), FixedProfiles(), sites, MeanEvaluator(), clock, settings)  # type: ignore[arg-type]
    return loop, sites


def test_round_folds_weighted_updates_and_records_time() -> None:
    """Updates are averaged by sample count; time and the round's split are recorded."""
    loop, _ = loop_with({"a": ok("a", 1.0, 1), "b": ok("b", 4.0, 3), "c": ok("c", 0.0, 4)})
    state = loop.run_round(loop.start(GLOBAL))
    np.testing.assert_allclose(state.global_params["w"], [1.625, 1.625])  # (1 + 12 + 0) / 8
    record = state.records[0]
    assert record.round_time_s == 10.0
    assert record.compute_time_s == 4.0
    assert record.communication_time_s == 1.0
    assert record.accuracy == pytest.approx(1.625)
    assert record.mean_power_available_ratio == pytest.approx((1.0 + 0.5 + 0.25) / 3)


@pytest.mark.parametrize(
    "bad",
    [
        SiteReport(
            "b", SiteStatus.OK, num_samples=3, update={"w": np.array([np.nan, 1], np.float32)}
        ),
        SiteReport("b", SiteStatus.OK, num_samples=3, update={"w": np.zeros(3, np.float32)}),
        SiteReport("b", SiteStatus.OK, num_samples=3, update={"v": np.zeros(2, np.float32)}),
        SiteReport("b", SiteStatus.OK, num_samples=0, update={"w": np.zeros(2, np.float32)}),
        SiteReport("b", SiteStatus.FAILED, message="connection reset"),
    ],
)
def test_bad_updates_are_dropped_and_the_round_goes_on(bad: SiteReport) -> None:
    """A NaN, misshapen, misnamed, empty or failed update is dropped; the others count."""
    loop, _ = loop_with({"a": ok("a", 2.0, 1), "b": bad, "c": ok("c", 2.0, 1)})
    state = loop.run_round(loop.start(GLOBAL))
    np.testing.assert_array_equal(state.global_params["w"], [2.0, 2.0])
    assert state.records[0].completed_site_ids == ("a", "c")
    assert [site for site, _ in state.records[0].dropped] == ["b"]


def test_only_bad_updates_leave_the_global_model_bit_for_bit() -> None:
    """When every update is rejected, the global model is the very same arrays."""
    nan = {"w": np.array([np.nan, 0], np.float32)}
    reports = {s: SiteReport(s, SiteStatus.OK, num_samples=1, update=nan) for s in "abc"}
    loop, _ = loop_with(reports)
    start = loop.start(GLOBAL)
    state = loop.run_round(start)
    assert state.global_params["w"] is start.global_params["w"]
    np.testing.assert_array_equal(state.global_params["w"], [0.0, 0.0])
    assert state.records[0].accuracy_gain == 0.0


def test_missing_and_unrequested_reports() -> None:
    """A site that never answers is dropped; a report from a site not asked is ignored."""
    loop, _ = loop_with({"a": ok("a", 2.0, 1), "zz": ok("zz", 100.0, 100)})
    state = loop.run_round(loop.start(GLOBAL))
    np.testing.assert_array_equal(state.global_params["w"], [2.0, 2.0])
    assert dict(state.records[0].dropped) == {"b": "failed: no report", "c": "failed: no report"}


def test_centralized_request_carries_the_cap() -> None:
    """The centralized baseline sends one site with its power cap and the centralized flag."""
    loop, sites = loop_with({"a": ok("a", 1.0, 1)}, Centralized(power_cap_ratio=0.25))
    state = loop.run_round(loop.start(GLOBAL))
    request = sites.requests[0]
    assert request.site_ids == ("a",)
    assert request.power_cap_ratio == 0.25
    assert request.centralized
    assert state.records[0].mean_power_available_ratio == 0.25


def test_run_stops_at_max_rounds_and_reports_tta() -> None:
    """`run` stops at the round budget; TTA is the end of the first round at the target."""
    loop, _ = loop_with({"a": ok("a", 0.5, 1)})
    state = loop.run(loop.start(GLOBAL))
    assert len(state.records) == 3  # accuracy 0.5 never reaches the 0.99 target
    assert state.time_to_accuracy_s(0.5) == 10.0
    assert state.time_to_accuracy_s(0.99) is None

    done, _ = loop_with({"a": ok("a", 1.0, 1)})
    assert len(done.run(done.start(GLOBAL)).records) == 1  # 1.0 >= 0.99 after one round


def test_settings_are_checked() -> None:
    """Target, round budget and deadline are validated."""
    with pytest.raises(ValueError, match="target_accuracy"):
        JobSettings(1e9, target_accuracy=1.5, max_rounds=3)
    with pytest.raises(ValueError, match="max_rounds"):
        JobSettings(1e9, target_accuracy=0.5, max_rounds=0)
    with pytest.raises(ValueError, match="round_deadline_s"):
        JobSettings(1e9, target_accuracy=0.5, max_rounds=3, round_deadline_s=0)
    with pytest.raises(ValueError, match="clock"):
        SimulatedClock().advance(-1)


def test_the_fold_ignores_repeats_and_anything_after_it_closed() -> None:
    """A site delivered LATE at the deadline cannot slip its update in afterwards, and a
    second report for a site is ignored; accepted reports are kept without their updates."""
    reference = {"w": np.zeros(2, np.float32)}
    fold = RoundFold(reference, ("a", "b", "c"))
    fold.deliver(ok("a", 1.0, 1))
    fold.deliver(ok("a", 9.0, 1))
    fold.deliver(SiteReport("b", SiteStatus.LATE, message="missed the deadline"))
    accepted, dropped = fold.close()
    fold.deliver(ok("b", 5.0, 1))
    fold.deliver(ok("c", 5.0, 1))
    assert [r.site_id for r in accepted] == ["a"]
    assert accepted[0].update is None
    assert dropped == [("b", "late: missed the deadline"), ("c", "failed: no report")]
    np.testing.assert_array_equal(fold.average.result()["w"], [1.0, 1.0])
