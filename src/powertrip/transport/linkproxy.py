"""A userspace TCP proxy that makes loopback behave like a long-distance link.

One proxy stands in front of each site: the aggregator and profiler connect to the proxy, the
proxy connects to the site, and every byte in either direction is delayed by the link's
one-way delay (distance / speed of light in fibre, Eq.3's d/c) and paced at its rate (the
bandwidth law), so the RTT and bandwidth the profiler measures, and the communication time a
round sees, reflect the emulated geography. It needs no privileges, unlike tc (deploy/netem).

Each direction is a pacer: a reader stamps every chunk with the time its last byte would leave
a link of that rate, plus the delay, and a writer sends it then. A bounded queue between them
holds about twice the link's bandwidth-delay product, so a fast sender is held back by TCP
instead of filling the proxy's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from dataclasses import dataclass

from powertrip.errors import InvalidValueError, PowerTripError
from powertrip.model.equations import propagation_delay_s

log = logging.getLogger(__name__)
READ_BYTES = 64 * 2**10


@dataclass(frozen=True)
class LinkProfile:
    """One-way delay and rate of an emulated link (rate None: as fast as loopback)."""

    delay_s: float = 0.0
    rate_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0):
            raise InvalidValueError(f"link delay must be >= 0 seconds, got {self.delay_s}")
        rate = self.rate_bytes_per_s
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise InvalidValueError(f"link rate must be > 0 bytes/s, got {rate}")

    @classmethod
    def for_site(cls, distance_km: float, bandwidth_bytes_per_s: float | None) -> LinkProfile:
        """The link of a site `distance_km` away: delay d/c, rate its bandwidth."""
        return cls(float(propagation_delay_s(distance_km)), bandwidth_bytes_per_s)

    @property
    def queue_chunks(self) -> int:
        """Chunks buffered per direction: twice the bandwidth-delay product, at least 16."""
        if self.rate_bytes_per_s is None:
            return 256
        in_flight = self.rate_bytes_per_s * max(self.delay_s, 0.01)
        return max(16, math.ceil(2 * in_flight / READ_BYTES))


class LinkProxy:
    """Listens on `listen_host:listen_port` (0: any free port) and forwards every connection
    to `target_host:target_port` through an emulated link. Runs its own event-loop thread."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        profile: LinkProfile,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.target = (target_host, target_port)
        self.profile = profile
        self.listen = (listen_host, listen_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        """host:port clients connect to."""
        return f"{self.listen[0]}:{self.port}"

    def start(self) -> LinkProxy:
        """Bind and start forwarding; returns self (its `port` is now set)."""
        self._thread.start()
        try:
            future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
            self.port = future.result(timeout=10)
        except OSError as error:
            self.stop()
            raise PowerTripError(f"link proxy cannot listen on {self.listen}: {error}") from None
        return self

    async def _serve(self) -> int:
        self._server = await asyncio.start_server(self._connect, *self.listen)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def stop(self) -> None:
        """Stop listening, drop every connection and end the thread."""
        if self._thread.is_alive():

            async def shutdown() -> None:
                if self._server is not None:
                    self._server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> LinkProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _connect(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            target_reader, target_writer = await asyncio.open_connection(*self.target)
        except OSError as error:
            log.warning("link proxy: cannot reach %s:%d: %s", *self.target, error)
            client_writer.close()
            return
        try:
            await asyncio.gather(
                self._direction(client_reader, target_writer),
                self._direction(target_reader, client_writer),
            )
        finally:
            for writer in (client_writer, target_writer):
                writer.close()

    async def _direction(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction until EOF, delayed and paced."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(self.profile.queue_chunks)
        rate = self.profile.rate_bytes_per_s

        async def receive() -> None:
            link_free_at = loop.time()
            with contextlib.suppress(OSError):
                while data := await reader.read(READ_BYTES):
                    now = loop.time()
                    if rate is None:
                        leaves = now
                    else:
                        link_free_at = max(now, link_free_at) + len(data) / rate
                        leaves = link_free_at
                    await queue.put((leaves + self.profile.delay_s, data))
            await queue.put(None)

        async def send() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

        with contextlib.suppress(OSError):
            await asyncio.gather(receive(), send())
