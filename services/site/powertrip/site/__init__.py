"""Site worker service: gRPC server training on its own data shard (not built yet)."""
