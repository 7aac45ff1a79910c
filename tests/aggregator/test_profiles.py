"""The aggregator's candidates: the profiler's healthy sites, less those it saw fail."""

import pytest

from powertrip.aggregator.profiles import NoSitesError, ProfiledSites, SiteHealth
from powertrip.proto.v1 import profiler_pb2
from powertrip.rounds import SiteReport, SiteStatus


def profile(site_id: str, healthy: bool = True, seen: float = 100.0) -> profiler_pb2.SiteProfile:
    """A measured profile."""
    return profiler_pb2.SiteProfile(
        site_id=site_id,
        address=f"127.0.0.1:{1000 + len(site_id)}",
        distance_km=500.0,
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=0.5,
        bandwidth_bytes_per_s=1e8,
        rtt_s=0.01,
        last_seen_unix_s=seen,
        healthy=healthy,
    )


class FakeProfiler:
    """Returns whatever profiles the test sets."""

    address = "profiler:1"

    def __init__(self, *profiles: profiler_pb2.SiteProfile) -> None:
        self.profiles = list(profiles)

    def list_profiles(self) -> list[profiler_pb2.SiteProfile]:
        return self.profiles


def test_a_failed_site_is_left_out_until_the_profiler_hears_from_it_again() -> None:
    """FAILED or LATE at t=200: out while last seen <= 200; back once seen after."""
    health = SiteHealth(clock=lambda: 200.0)
    profiler = FakeProfiler(profile("a"), profile("b"))
    sites = ProfiledSites(profiler, health)  # type: ignore[arg-type]
    health.observe(
        [
            SiteReport("a", SiteStatus.FAILED, message="UNAVAILABLE"),
            SiteReport("b", SiteStatus.OK),
        ]
    )
    assert sites.sites_at(0.0).site_ids == ("b",)
    assert health.unhealthy == {"a"}
    profiler.profiles = [profile("a", seen=201.0), profile("b")]
    assert sites.sites_at(0.0).site_ids == ("a", "b")
    assert health.unhealthy == frozenset()
    assert sites.addresses()["a"] == "127.0.0.1:1001"


def test_unhealthy_unpowered_and_unmeasured_sites_are_not_candidates() -> None:
    """Only healthy sites with power and a measured bandwidth can be selected; with none
    the round cannot start and the error says why."""
    unmeasured = profile("c")
    unmeasured.bandwidth_bytes_per_s = 0.0
    unpowered = profile("d")
    unpowered.power_available_ratio = 0.0
    profiler = FakeProfiler(profile("a", healthy=False), profile("b"), unmeasured, unpowered)
    sites = ProfiledSites(profiler, SiteHealth())  # type: ignore[arg-type]
    table = sites.sites_at(0.0)
    assert table.site_ids == ("b",)
    assert table.gpus.tolist() == [8]
    profiler.profiles = [profile("a", healthy=False)]
    with pytest.raises(NoSitesError, match="1 known, 0 healthy"):
        sites.sites_at(0.0)
