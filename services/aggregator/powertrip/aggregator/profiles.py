"""The aggregator's view of its sites: the profiler's latest profiles, less the sites the
aggregator itself saw fail.

A site that fails or misses a round's deadline is marked unhealthy by the aggregator and left
out of the candidates until the profiler has heard from it after that moment (its
`last_seen_unix_s` is later than the failure), so a crashed site is re-admitted as soon as it
answers again, and a merely slow one at the next poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from powertrip.errors import PowerTripError
from powertrip.model.sites import SiteTable
from powertrip.profiler.client import ProfilerClient
from powertrip.proto.v1 import profiler_pb2
from powertrip.rounds import SiteReport, SiteStatus

log = logging.getLogger(__name__)


class NoSitesError(PowerTripError):
    """No site is healthy, powered and measured: the round cannot start yet."""


class SiteHealth:
    """Sites the aggregator saw fail, and when."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._failed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def observe(self, reports: Iterable[SiteReport]) -> None:
        """Mark sites that failed or were late in a round."""
        now = self.clock()
        with self._lock:
            for report in reports:
                if report.status in (SiteStatus.FAILED, SiteStatus.LATE):
                    log.warning("site %s marked unhealthy: %s", report.site_id, report.message)
                    self._failed_at[report.site_id] = now

    def admits(self, profile: profiler_pb2.SiteProfile) -> bool:
        """Whether `profile` may take part: healthy, and seen since its last failure."""
        with self._lock:
            failed_at = self._failed_at.get(profile.site_id)
            if failed_at is not None and profile.healthy and profile.last_seen_unix_s > failed_at:
                log.info("site %s re-admitted", profile.site_id)
                del self._failed_at[profile.site_id]
                failed_at = None
        return profile.healthy and failed_at is None

    @property
    def unhealthy(self) -> frozenset[str]:
        """Sites currently left out for a failure."""
        with self._lock:
            return frozenset(self._failed_at)


class ProfiledSites:
    """`ProfileSource` over the profiler; also the site addresses for the `SiteClient`."""

    def __init__(self, profiler: ProfilerClient, health: SiteHealth) -> None:
        self.profiler = profiler
        self.health = health
        self._addresses: dict[str, str] = {}

    def sites_at(self, time_s: float) -> SiteTable:
        """Healthy sites with power and a measured link, as the profiler last saw them."""
        try:
            profiles = self.profiler.list_profiles()
        except Exception as error:  # grpc.RpcError: the profiler is down or restarting
            raise PowerTripError(
                f"cannot reach the profiler at {self.profiler.address}: {error}"
            ) from None
        usable = [
            p
            for p in profiles
            if self.health.admits(p)
            and p.power_available_ratio > 0
            and p.bandwidth_bytes_per_s > 0
            and p.gpus > 0
        ]
        self._addresses = {p.site_id: p.address for p in profiles}
        if not usable:
            raise NoSitesError(
                f"no site can take part now ({len(profiles)} known, "
                f"{sum(p.healthy for p in profiles)} healthy, "
                f"left out for failing: {sorted(self.health.unhealthy) or 'none'})"
            )
        return SiteTable.from_arrays(
            [p.site_id for p in usable],
            distance_km=[p.distance_km for p in usable],
            bandwidth_bytes_per_s=[p.bandwidth_bytes_per_s for p in usable],
            gpus=[p.gpus for p in usable],
            gpu_power_w=[p.gpu_power_w for p in usable],
            power_available_ratio=[min(1.0, p.power_available_ratio) for p in usable],
        )

    def addresses(self) -> Mapping[str, str]:
        """Site id -> address, from the latest listing."""
        return dict(self._addresses)
