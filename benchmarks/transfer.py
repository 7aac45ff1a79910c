"""Moving a 1 GiB update aggregator -> site -> aggregator over loopback gRPC, against a raw
TCP socket moving the same bytes both ways in the same run.

The gRPC path is the real one: `train_frames` / `read_train` on the way down and
`update_frames` / `read_update` on the way back (header, then 4 MiB chunks, size checked),
through the SiteService Train method of an echo site. The socket reference is one
`sendall` and `recv_into` a preallocated buffer each way. Last line:
`grpc_vs_raw_socket=<gRPC throughput / socket throughput>` (goal >= 0.6), from the medians
of interleaved runs: single runs of either vary by +-40% on our machines.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import numpy as np

from powertrip.proto.v1 import site_pb2
from powertrip.transport.payload import Payload, encode_params
from powertrip.transport.streams import (
    GRPC_OPTIONS,
    TRAIN_METHOD,
    raw_frames,
    read_train,
    read_update,
    train_frames,
    update_frames,
)

SIZE_BYTES = 2**30
REPEATS = 5


def echo_train(frames: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    """Train that returns the model it received as the update: pure transfer, no training."""
    _, payload = read_train(frames, context.peer())
    yield from update_frames(site_pb2.UpdateHeader(site_id="echo"), payload)


def grpc_round_trip_s(payload: Payload) -> float:
    """Seconds to stream `payload` to an echo site and read it back."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=GRPC_OPTIONS)
    handler = grpc.stream_stream_rpc_method_handler(
        echo_train, request_deserializer=raw_frames, response_serializer=raw_frames
    )
    service = TRAIN_METHOD.split("/")[1]
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service, {"Train": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as channel:
            train = channel.stream_stream(
                TRAIN_METHOD, request_serializer=raw_frames, response_deserializer=raw_frames
            )
            start = time.perf_counter()
            frames = train_frames(site_pb2.TrainHeader(job_id="b"), payload)
            _, received = read_update(train(frames, timeout=300), "echo")
            elapsed = time.perf_counter() - start
        assert received == payload.tobytes()  # outside the timing
        return elapsed
    finally:
        server.stop(grace=None)


def _receive_exactly(connection: socket.socket, buffer: bytearray) -> None:
    view = memoryview(buffer)
    while view:
        received = connection.recv_into(view)
        if received == 0:
            raise ConnectionError("peer closed early")
        view = view[received:]


def socket_round_trip_s(payload: bytes) -> float:
    """Seconds to send `payload` over a raw TCP socket to an echo thread and read it back."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(60)

    def echo() -> None:
        connection, _ = listener.accept()
        with connection:
            buffer = bytearray(len(payload))
            _receive_exactly(connection, buffer)
            connection.sendall(buffer)

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    with socket.create_connection(listener.getsockname(), timeout=300) as client:
        start = time.perf_counter()
        sender = threading.Thread(target=client.sendall, args=(payload,), daemon=True)
        sender.start()  # send and receive at once, as a full-duplex stream does
        back = bytearray(len(payload))
        _receive_exactly(client, back)
        sender.join()
        elapsed = time.perf_counter() - start
    thread.join(timeout=60)
    listener.close()
    return elapsed


def main() -> None:
    """Median of a few round trips each way; print throughputs and the ratio last."""
    params = {"update": np.random.default_rng(0).random(SIZE_BYTES // 4, dtype=np.float32)}
    payload = encode_params(params)  # views of the tensor, as the aggregator sends it
    contiguous = payload.tobytes()
    grpc_runs, socket_runs = [], []
    for _ in range(REPEATS):  # interleaved, so drift in the machine's speed hits both alike
        grpc_runs.append(grpc_round_trip_s(payload))
        socket_runs.append(socket_round_trip_s(contiguous))
    grpc_s, socket_s = statistics.median(grpc_runs), statistics.median(socket_runs)
    moved = 2 * payload.nbytes / 2**20
    print(f"payload {payload.nbytes / 2**30:.2f} GiB down and back ({REPEATS} runs, median)")
    print(f"gRPC streams: {grpc_s:.2f} s, {moved / grpc_s:,.0f} MiB/s")
    print(f"raw socket:   {socket_s:.2f} s, {moved / socket_s:,.0f} MiB/s")
    print(f"grpc_vs_raw_socket={socket_s / grpc_s:.3f}")


if __name__ == "__main__":
    main()
