"""Calls to the profiler: the aggregator lists profiles, a site registers itself."""

from __future__ import annotations

import grpc

from powertrip.proto.v1 import profiler_pb2
from powertrip.transport.servers import unary_call

PROFILER_SERVICE = "/powertrip.proto.v1.ProfilerService/"


class ProfilerClient:
    """A channel to the profiler at `address` (host:port)."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(address)
        self._list = unary_call(
            self.channel,
            PROFILER_SERVICE + "ListProfiles",
            profiler_pb2.ListProfilesRequest,
            profiler_pb2.ListProfilesResponse,
        )
        self._register = unary_call(
            self.channel,
            PROFILER_SERVICE + "Register",
            profiler_pb2.RegisterRequest,
            profiler_pb2.RegisterResponse,
        )

    def list_profiles(self) -> list[profiler_pb2.SiteProfile]:
        """Every site's latest profile."""
        reply: profiler_pb2.ListProfilesResponse = self._list(
            profiler_pb2.ListProfilesRequest(), timeout=self.timeout_s
        )
        return list(reply.profiles)

    def register(
        self, site_id: str, address: str, distance_km: float = 0.0, wait_s: float = 30.0
    ) -> str:
        """Register a site, waiting up to `wait_s` for the profiler to come up."""
        reply: profiler_pb2.RegisterResponse = self._register(
            profiler_pb2.RegisterRequest(site_id=site_id, address=address, distance_km=distance_km),
            timeout=wait_s,
            wait_for_ready=True,
        )
        return reply.message

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()
