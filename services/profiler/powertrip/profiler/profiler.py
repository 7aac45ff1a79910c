"""The profiler: keeps the latest power and link profile of every known site.

Sites become known from a list given at start (the aggregator's sites file) or by registering
themselves. Every `period_s` the profiler polls all sites at once: Describe (hardware, place),
power (the site's own Status, or a source the profiler reads itself: DCGM, NVML, trace),
RTT as the median of several small echoes, and every `bandwidth_every` polls the bandwidth of
a timed bulk download. A site that does not answer keeps its last measurements, is marked
unhealthy with the error, and is healthy again on its next good poll; `last_seen_unix_s` is
the time of its last good poll.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent import futures
from dataclasses import dataclass

import grpc

from powertrip.errors import InvalidValueError, PowerTripError
from powertrip.profiler.power import DcgmPowerSource
from powertrip.proto.v1 import site_pb2
from powertrip.site.power import PowerReading, PowerSource
from powertrip.sites_file import is_host_port
from powertrip.transport.servers import unary_call
from powertrip.transport.streams import GRPC_OPTIONS

log = logging.getLogger(__name__)
SITE_SERVICE = "/powertrip.proto.v1.SiteService/"
CONNECT_WAIT_S = 2.0


@dataclass(frozen=True)
class ProfilerSettings:
    """How often and how hard the profiler probes."""

    period_s: float = 2.0
    echo_count: int = 5
    echo_bytes: int = 64
    bandwidth_bytes: int = 4 * 2**20
    bandwidth_every: int = 5
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("period_s", "timeout_s"):
            if not getattr(self, name) > 0:
                raise InvalidValueError(f"profiler {name} must be > 0, got {getattr(self, name)}")
        for name in ("echo_count", "bandwidth_bytes", "bandwidth_every"):
            if getattr(self, name) < 1:
                raise InvalidValueError(f"profiler {name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Profile:
    """What the profiler knows about one site (profiler.proto SiteProfile)."""

    site_id: str
    address: str
    distance_km: float = 0.0
    gpus: int = 0
    gpu_power_w: float = 0.0
    power_available_ratio: float = 0.0
    power_w: float = 0.0
    power_limit_w: float = 0.0
    power_source: str = ""
    energy_j: float = 0.0
    rtt_s: float = 0.0
    bandwidth_bytes_per_s: float = 0.0
    last_seen_unix_s: float = 0.0
    healthy: bool = False
    error: str = "not polled yet"


class SiteProbe:
    """The profiler's calls to one site over gRPC."""

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
        self._describe = unary_call(
            self.channel,
            SITE_SERVICE + "Describe",
            site_pb2.DescribeRequest,
            site_pb2.SiteDescription,
        )
        self._status = unary_call(
            self.channel, SITE_SERVICE + "Status", site_pb2.StatusRequest, site_pb2.SiteStatus
        )
        self._echo = unary_call(
            self.channel, SITE_SERVICE + "Echo", site_pb2.EchoRequest, site_pb2.EchoReply
        )
        self._download = self.channel.unary_stream(
            SITE_SERVICE + "Download",
            request_serializer=site_pb2.DownloadRequest.SerializeToString,
            response_deserializer=site_pb2.DataChunk.FromString,
        )

    def describe(self) -> site_pb2.SiteDescription:
        """The site's identity and hardware. Waits briefly for a reconnecting channel, so a
        site that just came back is seen on this poll, but not so long that a dead site
        holds up the poll of every other."""
        reply: site_pb2.SiteDescription = self._describe(
            site_pb2.DescribeRequest(),
            timeout=min(self.timeout_s, CONNECT_WAIT_S),
            wait_for_ready=True,
        )
        return reply

    def power(self) -> PowerReading:
        """The site's own power reading."""
        status: site_pb2.SiteStatus = self._status(site_pb2.StatusRequest(), timeout=self.timeout_s)
        return PowerReading(
            status.power_available_ratio, status.power_w, status.power_limit_w, status.power_source
        )

    def rtt_s(self, count: int, size: int) -> float:
        """Median round trip of `count` echoes of `size` bytes (the first one warms up)."""
        return statistics.median(self.rtt_samples_s(count, size))

    def rtt_samples_s(self, count: int, size: int) -> list[float]:
        """Round trips of `count` echoes of `size` bytes, after one that warms up."""
        payload = site_pb2.EchoRequest(payload=bytes(size))
        self._echo(payload, timeout=self.timeout_s)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            self._echo(payload, timeout=self.timeout_s)
            times.append(time.perf_counter() - start)
        return times

    def bandwidth_bytes_per_s(self, total_bytes: int, rtt_s: float) -> float:
        """Bytes per second of a bulk download, its first round trip taken out."""
        start = time.perf_counter()
        received = 0
        request = site_pb2.DownloadRequest(total_bytes=total_bytes, chunk_bytes=2**20)
        for chunk in self._download(request, timeout=self.timeout_s):
            received += len(chunk.data)
        elapsed = time.perf_counter() - start
        if received != total_bytes:
            raise PowerTripError(f"bandwidth probe got {received} of {total_bytes} bytes")
        return total_bytes / max(elapsed - rtt_s, elapsed / 2, 1e-9)

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


class Profiler:
    """The registry of sites and their latest profiles, refreshed by `poll` (see the module
    docstring). `power_sources` maps a site id to a source the profiler reads itself."""

    def __init__(
        self,
        settings: ProfilerSettings,
        power_sources: Mapping[str, PowerSource] | None = None,
        on_poll: Callable[[Profile], None] | None = None,
    ) -> None:
        self.settings = settings
        self.power_sources = dict(power_sources or {})
        self.on_poll = on_poll
        self._profiles: dict[str, Profile] = {}
        self._probes: dict[str, SiteProbe] = {}
        self._polls: dict[str, int] = {}
        self._given_distance: set[str] = set()  # sites whose registration named a distance
        self._lock = threading.Lock()
        self._pool = futures.ThreadPoolExecutor(max_workers=32)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, site_id: str, address: str, distance_km: float = math.nan) -> str:
        """Add a site or update its address (a restarted site may come back elsewhere);
        returns what happened. A NaN distance means: take the site's own."""
        if not site_id.strip():
            raise InvalidValueError("a site registers with a non-empty site_id")
        if not is_host_port(address):
            raise InvalidValueError(f"site {site_id!r}: address {address!r} is not host:port")
        if not (math.isnan(distance_km) or (math.isfinite(distance_km) and distance_km >= 0)):
            raise InvalidValueError(
                f"site {site_id!r}: distance_km must be >= 0, got {distance_km}"
            )
        with self._lock:
            known = self._profiles.get(site_id)
            if known is not None and known.address == address:
                return f"site {site_id!r} already registered at {address}"
            if site_id in self._probes:
                self._probes.pop(site_id).close()
            profile = dataclasses.replace(known or Profile(site_id, address), address=address)
            if not math.isnan(distance_km):
                profile = dataclasses.replace(profile, distance_km=distance_km)
                self._given_distance.add(site_id)
            self._profiles[site_id] = profile
            self._probes[site_id] = SiteProbe(address, self.settings.timeout_s)
            self._polls[site_id] = 0
        log.info("site %s registered at %s", site_id, address)
        return f"site {site_id!r} registered at {address}"

    def profiles(self) -> list[Profile]:
        """The latest profile of every known site, by id."""
        with self._lock:
            return [self._profiles[s] for s in sorted(self._profiles)]

    def poll(self) -> list[Profile]:
        """Probe every site once, all at once; the new profiles."""
        with self._lock:
            targets = list(self._probes.items())
        list(self._pool.map(lambda item: self._poll_one(*item), targets))
        return self.profiles()

    def _poll_one(self, site_id: str, probe: SiteProbe) -> None:
        settings = self.settings
        with self._lock:
            before = self._profiles[site_id]
            polls = self._polls.get(site_id, 0)
        try:
            description = probe.describe()
            source = self.power_sources.get(site_id)
            if isinstance(source, DcgmPowerSource) and source.max_power_w is None:
                source.max_power_w = description.gpus * description.gpu_power_w or None
            power = source.read() if source is not None else probe.power()
            rtt = probe.rtt_s(settings.echo_count, settings.echo_bytes)
            bandwidth = before.bandwidth_bytes_per_s
            if polls % settings.bandwidth_every == 0 or not bandwidth:
                bandwidth = probe.bandwidth_bytes_per_s(settings.bandwidth_bytes, rtt)
        except (grpc.RpcError, PowerTripError) as error:
            message = _describe_error(error)
            if before.healthy:
                log.warning("site %s unhealthy: %s", site_id, message)
            profile = dataclasses.replace(before, healthy=False, error=message)
        else:
            now = time.time()
            elapsed = now - before.last_seen_unix_s if before.last_seen_unix_s else 0.0
            given = site_id in self._given_distance
            profile = dataclasses.replace(
                before,
                distance_km=before.distance_km if given else description.distance_km,
                gpus=description.gpus,
                gpu_power_w=description.gpu_power_w,
                power_available_ratio=power.power_available_ratio,
                power_w=power.power_w,
                power_limit_w=power.power_limit_w,
                power_source=power.source,
                energy_j=before.energy_j + before.power_w * elapsed,
                rtt_s=rtt,
                bandwidth_bytes_per_s=bandwidth,
                last_seen_unix_s=now,
                healthy=True,
                error="",
            )
            if not before.healthy and before.last_seen_unix_s:
                log.info("site %s answers again", site_id)
        with self._lock:
            if self._probes.get(site_id) is not probe:
                return  # re-registered meanwhile: this poll measured the old address
            self._profiles[site_id] = profile
            self._polls[site_id] = polls + 1
        if self.on_poll is not None:
            self.on_poll(profile)

    def start(self, sites: Iterable[tuple[str, str, float]] = ()) -> Profiler:
        """Register `sites` (id, address, distance km) and poll in the background."""
        for site_id, address, distance_km in sites:
            self.register(site_id, address, distance_km)
        self._thread = threading.Thread(target=self._run, name="profiler-poll", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll()
            except Exception:  # the poll loop must outlive any one bad poll
                log.exception("profiler poll failed")
            self._stop.wait(max(0.0, self.settings.period_s - (time.monotonic() - started)))

    def stop(self) -> None:
        """Stop polling and close every channel."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.timeout_s + 5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for probe in self._probes.values():
                probe.close()


def _describe_error(error: Exception) -> str:
    if isinstance(error, grpc.RpcError):
        code = error.code()
        details = error.details()
        return f"{code.name if code else 'UNKNOWN'}: {details}"
    return str(error)
