"""Calls to the profiler: the aggregator lists profiles, a site registers itself."""

from __future__ import annotations

import grpc

from powertrip.proto.v1 import profiler_pb2

PROFILER_SERVICE = "/powertrip.proto.v1.ProfilerService/"


class ProfilerClient:
    """A channel to the profiler at `address` (host:port)."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(address)
        self._list = self.channel.unary_unary(
            PROFILER_SERVICE + "ListProfiles",
            request_serializer=profiler_pb2.ListProfilesRequest.SerializeToString,
            response_deserializer=profiler_pb2.ListProfilesResponse.FromString,
        )
        self._register = self.channel.unary_unary(
            PROFILER_SERVICE + "Register",
            request_serializer=profiler_pb2.RegisterRequest.SerializeToString,
            response_deserializer=profiler_pb2.RegisterResponse.FromString,
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
