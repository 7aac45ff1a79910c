"""`SiteClient`s of the aggregator: gRPC site workers, or workers in this process.

Both run a round the same way: every selected site trains from the same global model with the
job's local-training settings, concurrently; each report is delivered from the thread that
received it as soon as it is complete; a site that fails is reported FAILED and one that
misses the round's deadline LATE, and the round goes on with the rest.

The gRPC client encodes the global model once per round as views of its tensors and streams
it to every site; it measures each site's communication time as the call's wall time minus
the compute time the site reports. Received updates stay in memory up to a budget (by
default one model's size) and spool to temporary files beyond it, so the aggregator's memory
is O(model) however many sites report at once (benchmarks/aggregate_memory.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from powertrip.errors import PowerTripError
from powertrip.fl.params import Params
from powertrip.proto.v1 import site_pb2
from powertrip.rounds import Deliver, SiteReport, SiteStatus, TrainRequest
from powertrip.site.worker import SiteWorker, TrainOrder
from powertrip.transport.buffers import Allocate, ReceiveBudget
from powertrip.transport.payload import decode_params, encode_params
from powertrip.transport.streams import (
    GRPC_OPTIONS,
    TRAIN_METHOD,
    raw_frames,
    read_update,
    train_frames,
)

log = logging.getLogger(__name__)

# How a failed Train call counts for the round (anything else: FAILED, the site is unhealthy).
_STATUS_OF_CODE = {
    grpc.StatusCode.DEADLINE_EXCEEDED: SiteStatus.LATE,
    grpc.StatusCode.INVALID_ARGUMENT: SiteStatus.REJECTED,
}


@dataclass(frozen=True)
class JobTraining:
    """The local-training settings a job sends to every site, and its seed."""

    job_id: str = "job"
    local_steps: int = 5
    batch_size: int = 32
    learning_rate: float = 0.05
    seed: int = 0
    local_epochs: float | None = None

    def order(self, request: TrainRequest) -> TrainOrder:
        """What a round asks of each site."""
        return TrainOrder(
            round_index=request.round_index,
            local_steps=self.local_steps,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            power_cap_ratio=request.power_cap_ratio,
            seed=self.seed,
            local_epochs=self.local_epochs,
        )


ABORT_POLL_S = 0.05
"""How often a round that can be aborted looks at its abort event."""

TrainOne = Callable[[str, Deliver], None]
"""Trains one site and delivers its report."""


def _fan_out(
    request: TrainRequest,
    train_one: TrainOne,
    pool: futures.Executor,
    deliver: Deliver,
    abort: threading.Event | None = None,
) -> None:
    """Run `train_one` for every selected site at once, each delivering its own report; at
    the round's deadline, sites still running are delivered LATE, and one whose path raised
    is FAILED (a bug at one site must not sink the round). When `abort` is set the round ends
    at once, every site still running FAILED."""

    def run(site: str) -> None:
        try:
            train_one(site, deliver)
        except Exception as error:
            log.exception("site %s failed", site)
            deliver(SiteReport(site, SiteStatus.FAILED, message=repr(error)))

    pending = {pool.submit(run, site): site for site in request.site_ids}
    running: set[futures.Future[None]] = set(pending)
    deadline = None if request.deadline_s is None else time.monotonic() + request.deadline_s
    while running and not (abort is not None and abort.is_set()):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        timeout = left if abort is None else min(left or ABORT_POLL_S, ABORT_POLL_S)
        _, running = futures.wait(running, timeout=timeout)
    aborted = abort is not None and abort.is_set()
    for future in running:
        future.cancel()
        if aborted:
            deliver(SiteReport(pending[future], SiteStatus.FAILED, message="round aborted"))
        else:
            deliver(SiteReport(pending[future], SiteStatus.LATE, message="missed the deadline"))


class InProcessSiteClient:
    """Sites as `SiteWorker`s in this process (tests, single-host runs)."""

    def __init__(self, workers: Mapping[str, SiteWorker], training: JobTraining) -> None:
        self.workers = dict(workers)
        self.training = training
        self._pool = futures.ThreadPoolExecutor(max_workers=max(1, len(self.workers)))

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Every selected worker trains; a deadline makes slower ones LATE."""
        order = self.training.order(request)

        def train_one(site: str, deliver: Deliver) -> None:
            worker = self.workers.get(site)
            if worker is None:
                deliver(SiteReport(site, SiteStatus.FAILED, message="unknown site"))
                return
            try:
                result = worker.train(order, request.global_params, "aggregator")
            except PowerTripError as error:
                deliver(SiteReport(site, SiteStatus.REJECTED, message=str(error)))
                return
            deliver(
                SiteReport(
                    site,
                    SiteStatus.OK,
                    num_samples=result.num_samples,
                    update=result.update,
                    compute_time_s=result.compute_time_s,
                    power_available_ratio=result.power_available_ratio,
                )
            )

        _fan_out(request, train_one, self._pool, deliver)

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class GrpcSiteClient:
    """Sites reached over gRPC at the addresses given by `addresses()` (site id -> host:port)."""

    def __init__(
        self,
        addresses: Callable[[], Mapping[str, str]],
        training: JobTraining,
        max_parallel: int = 64,
        buffered_updates: float | None = 1.0,
        spool_dir: Path | None = None,
        abort: threading.Event | None = None,
    ) -> None:
        """`buffered_updates`: how many model-sized updates may sit in memory at once before
        further ones spool to files in `spool_dir` (None: no limit). Setting `abort` ends the
        round in progress at once and cancels its calls."""
        self.abort = abort
        self.addresses = addresses
        self.training = training
        self.buffered_updates = buffered_updates
        self.spool_dir = spool_dir
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._pool = futures.ThreadPoolExecutor(max_workers=max_parallel)

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if address not in self._channels:
                self._channels[address] = grpc.insecure_channel(address, options=GRPC_OPTIONS)
            return self._channels[address]

    def train(self, request: TrainRequest, deliver: Deliver) -> None:
        """Stream the global model to every selected site and deliver the updates."""
        payload = encode_params(request.global_params)
        header = self.training.order(request)
        addresses = self.addresses()
        budget = ReceiveBudget(
            None if self.buffered_updates is None else int(self.buffered_updates * payload.nbytes),
            self.spool_dir,
        )

        calls: set[grpc.RpcContext] = set()

        def train_one(site: str, deliver: Deliver) -> None:
            with budget.buffers() as allocate:
                deliver(receive(site, allocate))

        def receive(site: str, allocate: Allocate) -> SiteReport:
            address = addresses.get(site)
            if address is None:
                return SiteReport(site, SiteStatus.FAILED, message="no address for this site")
            call = self._channel(address).stream_stream(
                TRAIN_METHOD, request_serializer=raw_frames, response_deserializer=raw_frames
            )
            frames = train_frames(
                site_pb2.TrainHeader(
                    job_id=self.training.job_id,
                    round_index=header.round_index,
                    local_steps=header.local_steps,
                    batch_size=header.batch_size,
                    learning_rate=header.learning_rate,
                    power_cap_ratio=header.power_cap_ratio or 0.0,
                    seed=header.seed,
                    local_epochs=header.local_epochs or 0.0,
                ),
                payload,
            )
            start = time.monotonic()
            try:
                responses = call(frames, timeout=request.deadline_s)
                with self._lock:
                    calls.add(responses)
                reply, update = read_update(responses, site, allocate)
            except grpc.RpcError as error:
                code = error.code()
                status = _STATUS_OF_CODE.get(code, SiteStatus.FAILED)
                return SiteReport(site, status, message=f"{code.name}: {error.details()}")
            except PowerTripError as error:
                return SiteReport(site, SiteStatus.REJECTED, message=str(error))
            elapsed = time.monotonic() - start
            params: Params = decode_params(update, site)  # type: ignore[assignment]
            return SiteReport(
                site,
                SiteStatus.OK,
                num_samples=int(reply.num_samples),
                update=params,
                compute_time_s=reply.compute_time_s,
                communication_time_s=max(0.0, elapsed - reply.compute_time_s),
                power_available_ratio=reply.power_available_ratio,
            )

        _fan_out(request, train_one, self._pool, deliver, self.abort)
        if self.abort is not None and self.abort.is_set():
            with self._lock:
                for pending in calls:
                    pending.cancel()

    def close(self) -> None:
        """Close every channel and stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
