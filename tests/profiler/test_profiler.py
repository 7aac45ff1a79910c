"""The profiler: polls real site servers (port 0), through an emulating proxy, over gRPC."""

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from powertrip.errors import InvalidValueError
from powertrip.profiler.client import ProfilerClient
from powertrip.profiler.power import DcgmPowerSource, NvmlPowerReader, parse_dcgm
from powertrip.profiler.profiler import Profiler, ProfilerSettings
from powertrip.profiler.server import ProfileCollector, ProfilerServicer, create_server
from powertrip.site.power import ConstantPowerSource, PowerError
from powertrip.site.server import SiteIdentity, SiteServicer
from powertrip.site.server import create_server as create_site_server
from powertrip.site.worker import ShardSpec, SiteWorker
from powertrip.transport.linkproxy import LinkProfile, LinkProxy
from support import FakeNvml

FAST = ProfilerSettings(period_s=0.2, echo_count=7, bandwidth_bytes=2**20, timeout_s=3.0)


@dataclass
class Site:
    """A site server on a fixed port (so it can be stopped and started again)."""

    worker: SiteWorker
    identity: SiteIdentity
    port: int = 0
    server: grpc.Server | None = None

    def start(self) -> None:
        self.server, self.port = create_site_server(
            SiteServicer(self.identity, self.worker), f"127.0.0.1:{self.port}"
        )
        self.server.start()

    def stop(self) -> None:
        assert self.server is not None
        self.server.stop(grace=None).wait(5)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def site() -> Iterator[Site]:
    """A digits site at 40% power with 2 x 500 W GPUs, 800 km away."""
    worker = SiteWorker(
        ShardSpec(task="digits", model="mlp", count=2, partition="iid"),
        ConstantPowerSource(0.4, 1000.0),
        stop=threading.Event(),
    )
    running = Site(worker, SiteIdentity("site-a", 800.0, gpus=2, gpu_power_w=500.0))
    running.start()
    yield running
    running.stop()


def test_a_poll_profiles_power_hardware_and_links(site: Site) -> None:
    """One poll reads the site's description, its power and measures RTT and bandwidth."""
    profiler = Profiler(FAST)
    profiler.register("site-a", site.address)
    (profile,) = profiler.poll()
    assert profile.healthy, profile.error
    assert (profile.gpus, profile.gpu_power_w, profile.distance_km) == (2, 500.0, 800.0)
    assert profile.power_available_ratio == pytest.approx(0.4)
    assert profile.power_w == pytest.approx(400.0)
    assert profile.power_source == "constant"
    assert 0 < profile.rtt_s < 0.5
    assert profile.bandwidth_bytes_per_s > 1e6
    assert profile.last_seen_unix_s > 0
    profiler.stop()


def test_rtt_and_bandwidth_through_the_link_proxy_match_its_profile(site: Site) -> None:
    """Behind a 20 ms / 8 MB/s emulated link the profiler measures 40 ms and 8 MB/s (15%)."""
    link = LinkProfile(delay_s=0.020, rate_bytes_per_s=8e6)
    with LinkProxy("127.0.0.1", site.port, link) as proxy:
        profiler = Profiler(ProfilerSettings(echo_count=9, bandwidth_bytes=4 * 2**20))
        profiler.register("site-a", proxy.address, distance_km=4000.0)
        (profile,) = profiler.poll()
        profiler.stop()
    assert profile.healthy, profile.error
    assert profile.distance_km == 4000.0  # a registered distance wins over the site's own
    assert profile.rtt_s == pytest.approx(0.040, rel=0.15)
    assert profile.bandwidth_bytes_per_s == pytest.approx(8e6, rel=0.15)


def test_a_site_that_stops_is_unhealthy_and_healthy_again_when_back(site: Site) -> None:
    """A dead site keeps its last measurements, is marked unhealthy with the error, and is
    healthy again on the first poll after it restarts."""
    profiler = Profiler(FAST)
    profiler.register("site-a", site.address)
    (first,) = profiler.poll()
    site.stop()
    (down,) = profiler.poll()
    assert not down.healthy
    assert "UNAVAILABLE" in down.error or "DEADLINE" in down.error
    assert down.last_seen_unix_s == first.last_seen_unix_s
    assert down.power_available_ratio == first.power_available_ratio
    site.start()
    (back,) = profiler.poll()
    assert back.healthy, back.error
    assert back.last_seen_unix_s > first.last_seen_unix_s
    profiler.stop()


@pytest.mark.parametrize(
    ("site_id", "address", "distance", "message"),
    [
        ("", "127.0.0.1:1", math.nan, "non-empty site_id"),
        ("s", "localhost", math.nan, "not host:port"),
        ("s", "h:port", math.nan, "not host:port"),
        ("s", "h:1", -5.0, "distance_km must be >= 0"),
    ],
)
def test_bad_registrations_are_refused(
    site_id: str, address: str, distance: float, message: str
) -> None:
    """Blank ids, malformed addresses and negative distances name what was wrong."""
    with pytest.raises(InvalidValueError, match=message):
        Profiler(FAST).register(site_id, address, distance)


def test_register_and_list_over_grpc_and_metrics(site: Site) -> None:
    """A site registers through the gRPC service; ListProfiles and /metrics show it; a bad
    registration is INVALID_ARGUMENT."""
    profiler = Profiler(FAST)
    server, port = create_server(ProfilerServicer(profiler))
    server.start()
    client = ProfilerClient(f"127.0.0.1:{port}")
    try:
        assert "registered" in client.register("site-a", site.address)
        assert "already" in client.register("site-a", site.address)
        profiler.poll()
        (profile,) = client.list_profiles()
        assert (profile.site_id, profile.address, profile.healthy) == ("site-a", site.address, True)
        with pytest.raises(grpc.RpcError) as refused:
            client.register("site-b", "nowhere")
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "not host:port" in (refused.value.details() or "")
        registry = CollectorRegistry()
        registry.register(ProfileCollector(profiler))
        text = generate_latest(registry).decode()
        for series in (
            'powertrip_site_power_available_ratio{site_id="site-a"} 0.4',
            'powertrip_site_power_watts{site_id="site-a"} 400.0',
            'powertrip_site_up{site_id="site-a"} 1.0',
            "powertrip_site_rtt_seconds{",
            "powertrip_site_bandwidth_bytes_per_second{",
            "powertrip_site_energy_joules_total{",
        ):
            assert series in text
    finally:
        client.close()
        server.stop(grace=None)
        profiler.stop()


DCGM_TEXT = """# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="H100"} 312.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100"} 280.0
# HELP DCGM_FI_DEV_POWER_MGMT_LIMIT Power management limit (in W).
# TYPE DCGM_FI_DEV_POWER_MGMT_LIMIT gauge
DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0",UUID="GPU-a",device="nvidia0",modelName="H100"} 350
DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100"} 350
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a"} 1980
"""


def test_dcgm_exporter_text_is_summed_over_the_sites_gpus() -> None:
    """Draw and cap add up over the GPUs asked for; other metrics are ignored."""
    assert parse_dcgm(DCGM_TEXT) == (592.5, 700.0, 2)
    assert parse_dcgm(DCGM_TEXT, frozenset({"1"})) == (280.0, 350.0, 1)
    with pytest.raises(PowerError, match="no DCGM_FI_DEV_POWER_USAGE"):
        parse_dcgm("DCGM_FI_DEV_SM_CLOCK 1\n")
    with pytest.raises(PowerError, match="not Prometheus text"):
        parse_dcgm("DCGM_FI_DEV_POWER_USAGE{gpu=0} abc\n")


def test_dcgm_source_scrapes_the_exporter() -> None:
    """Availability is the summed cap over the site's maximum; HTTP failures are errors."""

    def exporter(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=DCGM_TEXT)
        return httpx.Response(404)

    client = httpx.Client(transport=httpx.MockTransport(exporter))
    reading = DcgmPowerSource("http://gpu-host:9400/metrics", 1400.0, client=client).read()
    assert (reading.power_available_ratio, reading.power_w, reading.power_limit_w) == (
        0.5,
        592.5,
        700.0,
    )
    assert reading.source == "dcgm"
    with pytest.raises(PowerError, match="cannot scrape"):
        DcgmPowerSource("http://gpu-host:9400/nothing", 1400.0, client=client).read()
    with pytest.raises(PowerError, match="not known yet"):
        DcgmPowerSource("http://gpu-host:9400/metrics", client=client).read()


def test_nvml_reader_reports_the_cap_without_setting_it() -> None:
    """Availability = current cap / maximum cap; the reader has no way to change the cap."""
    nvml = FakeNvml()
    reading = NvmlPowerReader(0, nvml).read()
    assert (reading.power_available_ratio, reading.power_w, reading.power_limit_w) == (
        0.5,
        250.0,
        350.0,
    )
    assert nvml.limits == []
