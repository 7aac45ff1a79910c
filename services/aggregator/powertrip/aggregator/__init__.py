"""Aggregator service: REST job API and the round loop over gRPC sites (not built yet)."""
