"""Peak extra memory of the aggregator while 8 sites send back 256 MiB updates at once.

The aggregator side is the real one: `GrpcSiteClient` streams the global model to 8 sites and
delivers each update to the round's `RoundFold`, which checks it and folds it into float32
sums; updates beyond the memory budget (one model) spool to temporary files. The sites run in
a child process (their memory is not counted) and echo the model back at once, so all 8
updates arrive together. Memory is the process's anonymous resident set (RssAnon: heap,
numpy and gRPC buffers; not the page cache behind spooled files) sampled every millisecond,
minus its value before the round. Like the aggregator process, the benchmark first makes
glibc return large buffers to the system (`return_large_buffers_to_the_os`).

Reference, same run: the same round with every update held in memory and float64 sums, as
an aggregator that gathers all reports before averaging would. Last line:
`aggregate_peak_over_model=<peak extra / model size>` (goal <= 3).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import numpy as np

from powertrip.aggregator.site_clients import GrpcSiteClient, JobTraining
from powertrip.process import return_large_buffers_to_the_os
from powertrip.proto.v1 import site_pb2
from powertrip.rounds import RoundFold, TrainRequest
from powertrip.transport.servers import build_server
from powertrip.transport.streams import raw_frames, read_train, update_frames

MODEL_BYTES = 256 * 2**20
SITES = 8


def echo_train(frames: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    """A site that returns the model it got as its update, at once."""
    _, payload = read_train(frames, context.peer())
    yield from update_frames(site_pb2.UpdateHeader(site_id="echo", num_samples=100), payload)


def serve_sites() -> None:
    """Child mode: start the echo sites, print their ports, run until stdin closes."""
    servers = []
    for _ in range(SITES):
        handler = grpc.stream_stream_rpc_method_handler(
            echo_train, request_deserializer=raw_frames, response_serializer=raw_frames
        )
        server, port = build_server(
            "powertrip.proto.v1.SiteService", {"Train": handler}, max_workers=2
        )
        server.start()
        servers.append(server)
        print(port, flush=True)
    sys.stdin.read()


def rss_anon_bytes() -> int:
    """Anonymous resident memory of this process."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def peak_extra_bytes(
    addresses: dict[str, str], params: dict[str, np.ndarray], in_memory: bool
) -> tuple[int, float]:
    """Peak RssAnon growth during one 8-site round, and the round's seconds."""
    client = GrpcSiteClient(
        lambda: addresses, JobTraining(), buffered_updates=None if in_memory else 1.0
    )
    sites = tuple(addresses)
    fold = RoundFold(params, sites, np.float64 if in_memory else np.float32)
    kept = []

    def deliver(report: object) -> None:
        if in_memory:
            kept.append(report)  # a gather-then-average aggregator holds every report
        fold.deliver(report)  # type: ignore[arg-type]

    baseline = rss_anon_bytes()
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_anon_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    client.train(TrainRequest(1, sites, params, deadline_s=300), deliver)
    accepted, dropped = fold.close()
    average = fold.average.result()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    assert not dropped, dropped
    assert len(accepted) == SITES
    np.testing.assert_allclose(average["w"][:1000], params["w"][:1000], rtol=1e-6)
    client.close()
    return peak - baseline, elapsed


def main() -> None:
    """Start the sites, run the real round and the reference, print the ratio last."""
    assert return_large_buffers_to_the_os()  # what the aggregator process does at start
    child = subprocess.Popen(
        [sys.executable, __file__, "--sites"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert child.stdout is not None
    addresses = {f"site-{i}": f"127.0.0.1:{child.stdout.readline().strip()}" for i in range(SITES)}
    params = {"w": np.random.default_rng(0).random(MODEL_BYTES // 4, dtype=np.float32)}
    try:
        ours, ours_s = peak_extra_bytes(addresses, params, in_memory=False)
        naive, naive_s = peak_extra_bytes(addresses, params, in_memory=True)
    finally:
        child.communicate("")
    model = params["w"].nbytes
    print(f"model {model / 2**20:.0f} MiB, {SITES} sites answering at once")
    print(f"gather-then-average (float64, all in memory): peak +{naive / 2**20:,.0f} MiB "
          f"= {naive / model:.2f} x model, {naive_s:.1f} s")  # fmt: skip
    print(f"streaming fold (float32, 1-model budget, spool): peak +{ours / 2**20:,.0f} MiB "
          f"= {ours / model:.2f} x model, {ours_s:.1f} s")  # fmt: skip
    print(f"aggregate_peak_over_model={ours / model:.2f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--sites"]:
        serve_sites()
    else:
        main()
