"""Framing of the Train streams (site.proto): a header message, then the payload in chunks.

On the wire every message is a `TrainChunk` (down) or `UpdateChunk` (up), exactly as the
proto says, so any protobuf peer interoperates. Our own ends skip the protobuf objects for the
data chunks: a data chunk is the field-2 tag (0x12), a varint length and the bytes, built
straight from the payload with one copy and read back through a memoryview, where protobuf
objects cost two more copies of every byte (benchmarks/transfer.py: 0.39 -> 0.6 of a raw
socket). Frames that are not in that canonical form are parsed by protobuf.

Reading checks that the stream starts with a header, that no second header follows, and that
the chunks add up to exactly the size the header declared. gRPC methods that carry these
frames use `raw_frames` as their (de)serializer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from powertrip.fl.params import InvalidUpdateError
from powertrip.proto.v1 import site_pb2
from powertrip.transport.buffers import Allocate, memory_buffer
from powertrip.transport.payload import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, Buffer, Payload

GRPC_MESSAGE_LIMIT_BYTES = MAX_CHUNK_BYTES + 2**20
"""Send/receive message limit: a chunk plus room for its framing."""
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MESSAGE_LIMIT_BYTES),
    ("grpc.max_receive_message_length", GRPC_MESSAGE_LIMIT_BYTES),
    # A restarted site must be reachable within a poll or two: gRPC's default reconnect
    # backoff grows to two minutes after a peer goes away.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
"""Options of every channel and server: message limits and a short reconnect backoff."""
TRAIN_METHOD = "/powertrip.proto.v1.SiteService/Train"
_DATA_TAG = 0x12  # field 2 ("data"), wire type 2 (length-delimited), in both chunk messages


def raw_frames(frame: bytes) -> bytes:
    """Identity (de)serializer: the stream functions below produce and consume wire bytes."""
    return frame


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _frames(header: bytes, payload: Payload, chunk_bytes: int) -> Iterator[bytes]:
    """The header frame, then data frames of `chunk_bytes` (the last one shorter) cut across
    the payload's segments; each frame is built with one copy of its bytes."""
    yield header
    pieces: list[memoryview] = []
    size = 0
    for segment in payload.segments:
        view = segment.cast("B") if segment.format != "B" else segment
        while len(view):
            piece = view[: chunk_bytes - size]
            view = view[len(piece) :]
            pieces.append(piece)
            size += len(piece)
            if size == chunk_bytes:
                yield b"".join((bytes((_DATA_TAG,)), _varint(size), *pieces))
                pieces, size = [], 0
    if size:
        yield b"".join((bytes((_DATA_TAG,)), _varint(size), *pieces))


def train_frames(
    header: site_pb2.TrainHeader,
    payload: Buffer | Payload,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[bytes]:
    """Aggregator -> site: the round's header (with the payload size), then the model."""
    whole = Payload.of(payload)
    header.model_bytes = whole.nbytes
    yield from _frames(site_pb2.TrainChunk(header=header).SerializeToString(), whole, chunk_bytes)


def update_frames(
    header: site_pb2.UpdateHeader,
    payload: Buffer | Payload,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[bytes]:
    """Site -> aggregator: the update's header (with the payload size), then the update."""
    whole = Payload.of(payload)
    header.update_bytes = whole.nbytes
    yield from _frames(site_pb2.UpdateChunk(header=header).SerializeToString(), whole, chunk_bytes)


def read_train(
    frames: Iterable[bytes], source: str, allocate: Allocate = memory_buffer
) -> tuple[site_pb2.TrainHeader, memoryview]:
    """The header and payload of a Train request stream; the payload lands in `allocate`'s
    buffer."""
    iterator = iter(frames)
    first = site_pb2.TrainChunk.FromString(_first(iterator, source))
    if first.WhichOneof("part") != "header":
        raise InvalidUpdateError(f"stream from {source} does not start with a header")
    pieces = (_data(f, site_pb2.TrainChunk, source) for f in iterator)
    return first.header, _collect(pieces, first.header.model_bytes, source, allocate)


def read_update(
    frames: Iterable[bytes], source: str, allocate: Allocate = memory_buffer
) -> tuple[site_pb2.UpdateHeader, memoryview]:
    """The header and payload of a Train response stream; the payload lands in `allocate`'s
    buffer."""
    iterator = iter(frames)
    first = site_pb2.UpdateChunk.FromString(_first(iterator, source))
    if first.WhichOneof("part") != "header":
        raise InvalidUpdateError(f"stream from {source} does not start with a header")
    pieces = (_data(f, site_pb2.UpdateChunk, source) for f in iterator)
    return first.header, _collect(pieces, first.header.update_bytes, source, allocate)


def _first(iterator: Iterator[bytes], source: str) -> bytes:
    frame = next(iterator, None)
    if frame is None:
        raise InvalidUpdateError(f"stream from {source} does not start with a header")
    return frame


def _data(
    frame: bytes, message: type[site_pb2.TrainChunk] | type[site_pb2.UpdateChunk], source: str
) -> memoryview:
    """The bytes of a data chunk: read in place when canonical, else parsed by protobuf."""
    view = memoryview(frame)
    if len(view) > 1 and view[0] == _DATA_TAG:
        length, shift, position = 0, 0, 1
        while position < len(view) and shift < 64:
            byte = view[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if position + length == len(view):
            return view[position:]
    parsed = message.FromString(frame)
    if parsed.WhichOneof("part") != "data":
        raise InvalidUpdateError(f"stream from {source} holds a second header")
    return memoryview(parsed.data)


def _collect(
    pieces: Iterable[memoryview], declared: int, source: str, allocate: Allocate
) -> memoryview:
    """Join pieces into a buffer of exactly the declared size."""
    buffer = allocate(declared)
    filled = 0
    for piece in pieces:
        end = filled + len(piece)
        if end > declared:
            raise InvalidUpdateError(
                f"stream from {source} is larger than the {declared} bytes it declared"
            )
        buffer.write(piece)
        filled = end
    if filled != declared:
        raise InvalidUpdateError(
            f"stream from {source} ended after {filled} of the {declared} bytes it declared"
        )
    return buffer.view()
