"""The profiler's gRPC server (profiler.proto) and its Prometheus collector."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from powertrip import metrics
from powertrip.errors import InvalidValueError
from powertrip.profiler.profiler import Profile, Profiler
from powertrip.proto.v1 import profiler_pb2
from powertrip.transport.servers import build_server, unary

SERVICE_NAME = "powertrip.proto.v1.ProfilerService"


def to_proto(profile: Profile) -> profiler_pb2.SiteProfile:
    """A profile as its wire message."""
    return profiler_pb2.SiteProfile(**dataclasses.asdict(profile))


class ProfilerServicer:
    """Handlers of profiler.proto over a `Profiler`."""

    def __init__(self, profiler: Profiler) -> None:
        self.profiler = profiler

    def list_profiles(
        self, request: profiler_pb2.ListProfilesRequest, context: grpc.ServicerContext
    ) -> profiler_pb2.ListProfilesResponse:
        """The latest profile of every site."""
        return profiler_pb2.ListProfilesResponse(
            profiles=[to_proto(p) for p in self.profiler.profiles()]
        )

    def register(
        self, request: profiler_pb2.RegisterRequest, context: grpc.ServicerContext
    ) -> profiler_pb2.RegisterResponse:
        """Add a site (distance 0 or unset: the site's own)."""
        distance = request.distance_km if request.distance_km > 0 else math.nan
        try:
            message = self.profiler.register(request.site_id, request.address, distance)
        except InvalidValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return profiler_pb2.RegisterResponse(accepted=True, message=message)


def create_server(
    servicer: ProfilerServicer, address: str = "127.0.0.1:0"
) -> tuple[grpc.Server, int]:
    """A profiler server (not started) and the port it bound."""
    handlers = {
        "ListProfiles": unary(
            servicer.list_profiles,
            profiler_pb2.ListProfilesRequest,
            profiler_pb2.ListProfilesResponse,
        ),
        "Register": unary(
            servicer.register, profiler_pb2.RegisterRequest, profiler_pb2.RegisterResponse
        ),
    }
    return build_server(SERVICE_NAME, handlers, address)


class ProfileCollector(Collector):
    """Every site's latest profile as Prometheus series, read at scrape time."""

    def __init__(self, profiler: Profiler) -> None:
        self.profiler = profiler

    def collect(self) -> Iterator[Metric]:
        """Power, energy, RTT, bandwidth and health per site."""
        gauges = {
            metrics.SITE_POWER_AVAILABLE: (
                "Power the site may draw, over its maximum.",
                "power_available_ratio",
            ),
            metrics.SITE_POWER_WATTS: ("Power the site draws.", "power_w"),
            metrics.SITE_RTT: ("Median RTT of small echoes.", "rtt_s"),
            metrics.SITE_BANDWIDTH: ("Bandwidth of the last bulk probe.", "bandwidth_bytes_per_s"),
        }
        profiles = [p for p in self.profiler.profiles() if p.last_seen_unix_s]
        for name, (documentation, field) in gauges.items():
            family = GaugeMetricFamily(name, documentation, labels=["site_id"])
            for profile in profiles:
                family.add_metric([profile.site_id], getattr(profile, field))
            yield family
        energy = CounterMetricFamily(
            metrics.SITE_ENERGY,
            "Energy drawn since the profiler first saw the site.",
            labels=["site_id"],
        )
        up = GaugeMetricFamily(
            metrics.SITE_UP, "1 if the site answered its last poll.", labels=["site_id"]
        )
        for profile in self.profiler.profiles():
            up.add_metric([profile.site_id], float(profile.healthy))
            if profile.last_seen_unix_s:
                energy.add_metric([profile.site_id], profile.energy_j)
        yield energy
        yield up
