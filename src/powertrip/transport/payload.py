"""Model payloads: named arrays as safetensors bytes, sent in chunks.

Payloads are safetensors (an 8-byte little-endian header length, a JSON header of names,
dtypes, shapes and data offsets, then raw little-endian data): nothing received from the
network is ever unpickled or executed. Both directions work on the format directly, where the
safetensors library would copy: encoding returns a `Payload`, the header plus a view of each
tensor's memory, which the stream framing reads without ever joining (an aggregator sending a
GiB model holds no second GiB); decoding returns numpy views over the received buffer instead
of the library's two full copies (each copy of a GiB costs over a second on our machines). It
checks every header field, that the tensors tile the data exactly, and the declared payload
size; a malformed payload is an `InvalidUpdateError`, so a round can reject it and go on.
Tests check both directions against the library.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from powertrip.errors import InvalidValueError
from powertrip.fl.params import InvalidUpdateError

DEFAULT_CHUNK_BYTES = 2**20
"""Chunk size of streamed payloads. Measured on loopback: 1-4 MiB chunks move a GiB fastest
(16 and 64 MiB chunks are slower: their copies no longer fit the caches), and 1 MiB keeps the
fewest bytes in flight per stream: an aggregator receiving 8 updates at once peaked at
2.4-2.5 x the model with 1 MiB chunks and 3.0-3.1 x with 4 MiB (benchmarks/)."""
MAX_CHUNK_BYTES = 4 * 2**20
"""The largest chunk a peer may send."""


Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True)
class Payload:
    """A safetensors file as consecutive segments: the header, then each tensor's bytes."""

    segments: tuple[memoryview, ...]

    @property
    def nbytes(self) -> int:
        """Size of the whole file."""
        return sum(segment.nbytes for segment in self.segments)

    def tobytes(self) -> bytes:
        """The file as one bytes object (a copy: for tests and small payloads)."""
        return b"".join(self.segments)

    @classmethod
    def of(cls, data: Buffer | Payload) -> Payload:
        """`data` as a payload (raw bytes become one segment)."""
        return data if isinstance(data, Payload) else cls((memoryview(data).cast("B"),))


def encode_params(params: Mapping[str, NDArray[np.generic]]) -> Payload:
    """Named arrays as a safetensors payload viewing their memory (copied only when an array
    is not C-contiguous little-endian)."""
    codes = {dtype: code for code, dtype in _DTYPES.items()}
    header: dict[str, dict[str, Any]] = {}
    data: list[memoryview] = []
    offset = 0
    for name, value in params.items():
        array = np.asarray(value)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        code = codes.get(dtype)
        if code is None:
            raise InvalidValueError(
                f"tensor {name!r}: dtype {array.dtype} cannot be sent; "
                f"supported: {', '.join(str(d) for d in codes)}"
            )
        array = np.require(array.astype(dtype, copy=False), requirements="C")
        header[name] = {
            "dtype": code,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
        if array.nbytes:
            data.append(array.reshape(-1).view(np.uint8).data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8-byte alignment
    return Payload((memoryview(len(text).to_bytes(8, "little") + text), *data))


_DTYPES: dict[str, np.dtype[Any]] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_MAX_HEADER_BYTES = 100 * 2**20


def decode_params(payload: Buffer, source: str) -> dict[str, NDArray[np.generic]]:
    """The arrays of a safetensors payload, as read-only views over it; `source` names the
    sender in errors."""
    view = memoryview(payload).cast("B")

    def invalid(reason: str) -> InvalidUpdateError:
        return InvalidUpdateError(
            f"payload from {source} is not a valid safetensors file: {reason}"
        )

    if len(view) < 8:
        raise invalid(f"{len(view)} bytes is too short")
    header_bytes = int.from_bytes(view[:8], "little")
    if header_bytes > min(len(view) - 8, _MAX_HEADER_BYTES):
        raise invalid(f"header of {header_bytes} bytes does not fit")
    try:
        header = json.loads(bytes(view[8 : 8 + header_bytes]))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise invalid(f"header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise invalid("header is not a JSON object")
    data = view[8 + header_bytes :]
    arrays: dict[str, NDArray[np.generic]] = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise invalid(f"tensor {name!r} has a malformed entry {info!r}") from None
        if min(shape, default=0) < 0 or not 0 <= begin <= end <= len(data):
            raise invalid(f"tensor {name!r}: offsets {begin}..{end} outside {len(data)} bytes")
        if end - begin != math.prod(shape) * dtype.itemsize:
            raise invalid(f"tensor {name!r}: {end - begin} bytes for shape {shape} of {dtype}")
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
        array.flags.writeable = False
        arrays[name] = array
        spans.append((begin, end))
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise invalid("tensor data overlaps or leaves gaps")
        position = end
    if position != len(data):
        raise invalid(f"{len(data) - position} bytes after the last tensor")
    return arrays
