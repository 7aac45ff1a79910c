"""Safetensors payloads and the chunked Train stream framing."""

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import load

from powertrip.errors import InvalidValueError
from powertrip.fl import InvalidUpdateError
from powertrip.proto.v1 import site_pb2
from powertrip.transport.payload import decode_params, encode_params
from powertrip.transport.streams import read_train, read_update, train_frames, update_frames

PARAMS: dict[str, np.ndarray] = {
    "w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "b": np.array([1.5, -2.0], dtype=np.float64),
    "n": np.array([7], dtype=np.int64),
    "h": np.ones((2, 2), dtype=np.float16),
}


def test_round_trip_matches_the_safetensors_library() -> None:
    """What we encode the library reads, and what we decode equals what the library reads."""
    payload = encode_params(PARAMS).tobytes()
    reference = load(payload)
    decoded = decode_params(payload, "site-1")
    assert sorted(decoded) == sorted(PARAMS)
    for name, array in PARAMS.items():
        np.testing.assert_array_equal(decoded[name], array)
        assert decoded[name].dtype == reference[name].dtype == array.dtype
        assert not decoded[name].flags.writeable  # views over the received buffer


def test_encoding_views_the_tensors_and_handles_odd_layouts() -> None:
    """Contiguous tensors are sent from their own memory; transposed, big-endian and 0-d
    arrays still encode to what the library reads back; unsupported dtypes are refused."""
    contiguous = np.arange(6, dtype=np.float32)
    odd = {
        "t": np.arange(6, dtype=np.float32).reshape(2, 3).T,
        "be": np.arange(3, dtype=">i4"),
        "scalar": np.array(2.5, dtype=np.float64),
        "empty": np.zeros((0, 3), np.float32),
    }
    payload = encode_params({"c": contiguous})
    assert np.shares_memory(np.frombuffer(payload.segments[1], np.float32), contiguous)
    loaded = load(encode_params(odd).tobytes())
    for name, array in odd.items():
        np.testing.assert_array_equal(loaded[name], array)
        assert loaded[name].shape == array.shape
    with pytest.raises(InvalidValueError, match=r"'z'.*complex64"):
        encode_params({"z": np.zeros(2, np.complex64)})


def raw(header: dict[str, object], data: bytes) -> bytes:
    """A payload with a hand-written header."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 10**9) + b"{}", "does not fit"),
        (struct.pack("<Q", 3) + b"{{{", "not JSON"),
        (raw([1, 2], b""), "not a JSON object"),  # type: ignore[arg-type]
        (raw({"w": {"dtype": "F32", "shape": [2]}}, b"\0" * 8), "malformed entry"),
        (
            raw({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
            "malformed",
        ),
        (raw({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, b"\0" * 8), "outside"),
        (
            raw({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
            "8 bytes for shape",
        ),
        (
            raw(
                {
                    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                },
                b"\0" * 8,
            ),
            "overlaps or leaves gaps",
        ),
        (
            raw({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
            "4 bytes after",
        ),
    ],
)
def test_malformed_payloads_are_rejected(payload: bytes, message: str) -> None:
    """Anything but a well-formed safetensors payload is an error naming the sender."""
    with pytest.raises(InvalidUpdateError, match=message) as caught:
        decode_params(payload, "site-9")
    assert "site-9" in str(caught.value)


def test_train_stream_round_trip_over_several_chunks() -> None:
    """A payload larger than one chunk streams and reassembles, header first."""
    payload = np.random.default_rng(0).bytes(9 * 2**20 + 5)
    frames = list(train_frames(site_pb2.TrainHeader(job_id="j", round_index=3), payload))
    assert len(frames) == 1 + 10  # nine whole 1 MiB chunks and the last 5 bytes
    header, received = read_train(frames, "aggregator")
    assert (header.job_id, header.round_index, header.model_bytes) == ("j", 3, len(payload))
    assert bytes(received) == payload


def test_frames_are_the_proto_messages_both_ways() -> None:
    """Our frames parse as UpdateChunk messages, and protobuf-serialized chunks read back:
    any protobuf peer interoperates."""
    payload = bytes(range(256)) * 300
    frames = list(update_frames(site_pb2.UpdateHeader(site_id="s", num_samples=4), payload, 1000))
    parsed = [site_pb2.UpdateChunk.FromString(f) for f in frames]
    assert parsed[0].header.update_bytes == len(payload)
    assert b"".join(p.data for p in parsed[1:]) == payload
    from_protobuf = [p.SerializeToString() for p in parsed]
    header, received = read_update(from_protobuf, "s")
    assert (header.site_id, header.num_samples, bytes(received)) == ("s", 4, payload)
    # A chunk with an extra (unknown) field after the data is not canonical: protobuf reads it.
    odd = parsed[1].SerializeToString() + b"\x18\x01"
    _, again = read_update([frames[0], odd, *frames[2:]], "s")
    assert bytes(again) == payload


def test_stream_framing_errors() -> None:
    """No header, a second header, or a size other than declared is rejected."""
    good = list(update_frames(site_pb2.UpdateHeader(site_id="s"), b"x" * 10, chunk_bytes=4))
    with pytest.raises(InvalidUpdateError, match="does not start with a header"):
        read_update(good[1:], "s")
    with pytest.raises(InvalidUpdateError, match="second header"):
        read_update([good[0], good[0]], "s")
    with pytest.raises(InvalidUpdateError, match="ended after 8 of the 10 bytes"):
        read_update(good[:-1], "s")
    with pytest.raises(InvalidUpdateError, match="larger than the 10 bytes"):
        read_update([*good, good[1]], "s")
    with pytest.raises(InvalidUpdateError, match="does not start with a header"):
        read_update([], "s")
