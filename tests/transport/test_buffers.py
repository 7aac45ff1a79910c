"""Receive buffers: memory within the budget, spool files beyond it, released after use."""

import numpy as np

from powertrip.transport.buffers import FileBuffer, MemoryBuffer, ReceiveBudget
from powertrip.transport.payload import decode_params, encode_params


def fill(allocate_size: int, budget: ReceiveBudget, data: bytes) -> tuple[type, bytes]:
    """Allocate, write `data` in two pieces, return the buffer kind and what it holds."""
    with budget.buffers() as allocate:
        buffer = allocate(allocate_size)
        view = memoryview(data)
        buffer.write(view[:3])
        buffer.write(view[3:])
        kind, held = type(buffer), bytes(buffer.view())
        assert budget.in_memory_bytes == (allocate_size if kind is MemoryBuffer else 0)
    return kind, held


def test_payloads_beyond_the_budget_spool_and_the_budget_is_released() -> None:
    """A payload that fits stays in memory; one that does not goes to a file; both read back
    the same bytes, and leaving the block frees the reservation."""
    budget = ReceiveBudget(max_bytes=10)
    assert fill(8, budget, b"12345678") == (MemoryBuffer, b"12345678")
    assert fill(11, budget, b"12345678901") == (FileBuffer, b"12345678901")
    assert budget.in_memory_bytes == 0
    assert budget.spooled == 1


def test_a_spooled_update_decodes_like_one_in_memory() -> None:
    """Arrays decoded from a mapped spool file equal the originals and outlive its block."""
    params: dict[str, np.ndarray] = {
        "w": np.arange(1000, dtype=np.float32),
        "b": np.ones(3, np.float64),
    }
    payload = encode_params(params).tobytes()
    with ReceiveBudget(max_bytes=0).buffers() as allocate:
        buffer = allocate(len(payload))
        buffer.write(memoryview(payload))
        decoded = decode_params(buffer.view(), "site")
    for name, array in params.items():
        np.testing.assert_array_equal(decoded[name], array)
