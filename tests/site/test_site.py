"""The site worker and its gRPC server, in process on port 0."""

import threading
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from powertrip.proto.v1 import site_pb2
from powertrip.site.power import (
    ConstantPowerSource,
    NvmlPowerSource,
    PowerError,
    TraceReplayPowerSource,
)
from powertrip.site.server import SiteIdentity, SiteServicer, create_server
from powertrip.site.worker import ShardSpec, SiteWorker, TrainOrder
from powertrip.traces.google import PowerDomainTrace
from powertrip.transport.payload import decode_params, encode_params
from powertrip.transport.streams import (
    GRPC_OPTIONS,
    TRAIN_METHOD,
    raw_frames,
    read_update,
    train_frames,
)
from support import FakeNvml

SPEC = ShardSpec(task="digits", model="mlp", seed=3, index=1, count=4, partition="iid")


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[grpc.Channel, SiteWorker]]:
    """A running site server and a channel to it."""
    worker = SiteWorker(SPEC, ConstantPowerSource(1.0, 2800.0))
    server, port = create_server(SiteServicer(SiteIdentity("site-b", 420.0, 4, 700.0), worker))
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        yield channel, worker
    server.stop(grace=1).wait(5)


def call_train(
    channel: grpc.Channel, frames: Iterator[bytes]
) -> tuple[site_pb2.UpdateHeader, memoryview]:
    """Run the Train method with raw frames."""
    train = channel.stream_stream(
        TRAIN_METHOD, request_serializer=raw_frames, response_deserializer=raw_frames
    )
    return read_update(train(frames, timeout=60), "site-b")


def unary(channel: grpc.Channel, method: str, request: object, reply: type) -> object:
    """Call a unary method of the site service."""
    call = channel.unary_unary(
        f"/powertrip.proto.v1.SiteService/{method}",
        request_serializer=type(request).SerializeToString,  # type: ignore[attr-defined]
        response_deserializer=reply.FromString,  # type: ignore[attr-defined]
    )
    return call(request, timeout=10)


def test_shards_are_deterministic_and_disjoint() -> None:
    """The same spec gives the same rows; other indices get other rows."""
    a = SiteWorker(SPEC, ConstantPowerSource(1.0, 1.0))
    again = SiteWorker(SPEC, ConstantPowerSource(1.0, 1.0))
    other = SiteWorker(ShardSpec(**{**SPEC.__dict__, "index": 2}), ConstantPowerSource(1.0, 1.0))
    assert np.array_equal(a.x.numpy(), again.x.numpy())
    assert a.num_samples == again.num_samples > 300
    assert not np.array_equal(a.x.numpy()[:20], other.x.numpy()[:20])


def test_describe_status_echo_health(site: tuple[grpc.Channel, SiteWorker]) -> None:
    """Identity, power, RTT echo and the standard health service answer."""
    channel, worker = site
    description = unary(channel, "Describe", site_pb2.DescribeRequest(), site_pb2.SiteDescription)
    assert isinstance(description, site_pb2.SiteDescription)
    assert (description.site_id, description.gpus, description.num_samples) == (
        "site-b",
        4,
        worker.num_samples,
    )
    status = unary(channel, "Status", site_pb2.StatusRequest(), site_pb2.SiteStatus)
    assert isinstance(status, site_pb2.SiteStatus)
    assert (status.power_available_ratio, status.power_w, status.power_source) == (
        1.0,
        2800.0,
        "constant",
    )
    echo = unary(channel, "Echo", site_pb2.EchoRequest(payload=b"ping"), site_pb2.EchoReply)
    assert isinstance(echo, site_pb2.EchoReply)
    assert echo.payload == b"ping"
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)  # type: ignore[attr-defined]
    assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_download_streams_the_requested_bytes(site: tuple[grpc.Channel, SiteWorker]) -> None:
    """The bandwidth probe sends exactly what was asked; too much is refused."""
    channel, _ = site
    download = channel.unary_stream(
        "/powertrip.proto.v1.SiteService/Download",
        request_serializer=site_pb2.DownloadRequest.SerializeToString,
        response_deserializer=site_pb2.DataChunk.FromString,
    )
    chunks = list(
        download(site_pb2.DownloadRequest(total_bytes=5 * 2**20 + 3, chunk_bytes=2**20), timeout=30)
    )
    assert sum(len(c.data) for c in chunks) == 5 * 2**20 + 3
    with pytest.raises(grpc.RpcError) as caught:
        list(download(site_pb2.DownloadRequest(total_bytes=2**31), timeout=30))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_train_returns_a_trained_update(site: tuple[grpc.Channel, SiteWorker]) -> None:
    """The global model goes down, an update of the same tensors comes back, trained."""
    channel, worker = site
    header = site_pb2.TrainHeader(round_index=1, local_steps=3, batch_size=16, learning_rate=0.1)
    reply, payload = call_train(channel, train_frames(header, encode_params(worker.reference)))
    update = decode_params(payload, "site-b")
    assert (reply.site_id, reply.num_samples) == ("site-b", worker.num_samples)
    assert reply.compute_time_s > 0
    assert sorted(update) == sorted(worker.reference)
    assert all(update[n].shape == worker.reference[n].shape for n in update)
    assert any(not np.array_equal(update[n], worker.reference[n]) for n in update)


@pytest.mark.parametrize("problem", ["shape", "garbage", "truncated"])
def test_bad_models_are_refused_with_invalid_argument(
    site: tuple[grpc.Channel, SiteWorker], problem: str
) -> None:
    """A model of the wrong shape, a non-safetensors payload or a cut stream: INVALID_ARGUMENT."""
    channel, worker = site
    params = dict(worker.reference)
    if problem == "shape":
        name = next(iter(params))
        params[name] = np.zeros((2, 2), np.float32)
    payload = b"not safetensors at all" if problem == "garbage" else encode_params(params)
    frames = list(train_frames(site_pb2.TrainHeader(round_index=1), payload, chunk_bytes=1024))
    if problem == "truncated":
        frames = frames[:-2]
    with pytest.raises(grpc.RpcError) as caught:
        call_train(channel, iter(frames))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


class RecordingEvent(threading.Event):
    """An event whose waits are recorded instead of slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return False


def test_worker_stretches_compute_by_availability() -> None:
    """At 50% power (or a 50% cap) the site waits until compute took twice as long."""
    ticks = iter([10.0, 12.0, 20.0, 23.0])
    stop = RecordingEvent()
    worker = SiteWorker(SPEC, ConstantPowerSource(0.5, 1.0), clock=lambda: next(ticks), stop=stop)
    result = worker.train(TrainOrder(1, 1, 8, 0.1), worker.reference, "test")
    assert (result.compute_time_s, result.power_available_ratio, stop.waits) == (4.0, 0.5, [2.0])
    capped = worker.train(TrainOrder(2, 1, 8, 0.1, power_cap_ratio=0.25), worker.reference, "test")
    assert (capped.compute_time_s, capped.power_available_ratio) == (12.0, 0.25)


def test_trace_replay_advances_with_the_clock() -> None:
    """Replay reads step (offset + elapsed / step_s), with a floor for domains without spare."""
    trace = PowerDomainTrace("t", "a", "a1", 0.0, 300.0, np.array([0.4, 0.0, 0.7]), 3, 0)
    now = [100.0]
    source = TraceReplayPowerSource(
        trace, 1000.0, offset_steps=0, step_s=10.0, clock=lambda: now[0]
    )
    readings = []
    for elapsed in (0.0, 10.0, 20.0, 30.0):
        now[0] = 100.0 + elapsed
        readings.append(source.read().power_available_ratio)
    assert readings == [0.4, 0.01, 0.7, 0.4]


def test_nvml_caps_the_gpu_to_availability() -> None:
    """The limit is availability x maximum, clamped to the GPU's minimum, set once per change."""
    nvml = FakeNvml()
    source = NvmlPowerSource(ConstantPowerSource(0.5, 1.0), nvml=nvml)
    reading = source.read()
    source.read()
    assert (reading.power_limit_w, reading.power_w, reading.source) == (350.0, 250.0, "nvml")
    assert nvml.limits == [350_000]
    low = NvmlPowerSource(ConstantPowerSource(0.1, 1.0), nvml=FakeNvml()).read()
    assert low.power_limit_w == 100.0  # 70 W asked, the GPU's floor is 100 W


def test_nvml_errors_say_what_they_mean() -> None:
    """NVML failures become PowerErrors explaining the cause."""
    source = NvmlPowerSource(ConstantPowerSource(0.5, 1.0), nvml=FakeNvml(refuse=True))
    with pytest.raises(PowerError, match="needs root or CAP_SYS_ADMIN"):
        source.read()


@pytest.mark.parametrize(
    ("epochs", "samples", "steps"), [(None, 100, 7), (1.0, 112, 7), (2.0, 100, 13), (0.01, 100, 1)]
)
def test_local_epochs_become_passes_over_the_shard(
    epochs: float | None, samples: int, steps: int
) -> None:
    """local_epochs=e means ceil(e * samples / batch) steps (at least one); unset, local_steps."""
    order = TrainOrder(
        round_index=1, local_steps=7, batch_size=16, learning_rate=0.1, local_epochs=epochs
    )
    assert order.steps_for(samples) == steps
