"""The link-emulating proxy: the RTT and bandwidth measured through it match its profile."""

import socket
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

from powertrip.errors import InvalidValueError
from powertrip.transport.linkproxy import LinkProfile, LinkProxy


@pytest.fixture
def echo_server() -> Iterator[int]:
    """A TCP echo server on loopback (port yielded), stopped after the test."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(2**16):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def round_trips_s(port: int, count: int = 15) -> list[float]:
    """Times of small request/reply exchanges over one connection."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            conn.sendall(b"x" * 32)
            received = 0
            while received < 32:
                received += len(conn.recv(64))
            times.append(time.perf_counter() - start)
        return times


def test_rtt_through_the_proxy_is_twice_the_one_way_delay(echo_server: int) -> None:
    """A 25 ms one-way link answers small echoes in 50 ms, within 15%."""
    with LinkProxy("127.0.0.1", echo_server, LinkProfile(delay_s=0.025)) as proxy:
        rtt = statistics.median(round_trips_s(proxy.port))
    assert rtt == pytest.approx(0.050, rel=0.15)


def test_bandwidth_through_the_proxy_is_its_rate(echo_server: int) -> None:
    """2 MB pushed through a 4 MB/s link take about half a second each way."""
    size = 2_000_000
    rate = 4e6
    with (
        LinkProxy("127.0.0.1", echo_server, LinkProfile(0.002, rate)) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port)) as conn,
    ):
        start = time.perf_counter()
        sender = threading.Thread(target=conn.sendall, args=(bytes(size),))
        sender.start()
        received = 0
        while received < size:
            received += len(conn.recv(2**16))
        elapsed = time.perf_counter() - start
        sender.join()
    # Echoed: the bytes cross the link twice, but the two directions are paced in parallel.
    assert size / elapsed == pytest.approx(rate, rel=0.15)


def test_a_site_distance_gives_the_fibre_delay() -> None:
    """1000 km of fibre at 2e8 m/s is 5 ms one way."""
    assert LinkProfile.for_site(1000.0, 1e8).delay_s == pytest.approx(0.005)


@pytest.mark.parametrize(("delay", "rate"), [(-0.1, None), (0.0, 0.0), (float("nan"), None)])
def test_impossible_profiles_are_refused(delay: float, rate: float | None) -> None:
    """Negative or NaN delay and a zero rate are errors that name the value."""
    with pytest.raises(InvalidValueError, match="link"):
        LinkProfile(delay, rate)


def test_an_unreachable_target_closes_the_client(echo_server: int) -> None:
    """When the site is down the proxy closes the connection instead of hanging."""
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with (
        LinkProxy("127.0.0.1", port, LinkProfile()) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn,
    ):
        assert conn.recv(1) == b""
