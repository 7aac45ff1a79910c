"""Moving models over the network: safetensors payloads in chunks (no gRPC types here)."""
