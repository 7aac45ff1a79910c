"""Two network namespaces joined by a veth pair, made and removed by the test that uses them.

Traffic between them never leaves the machine (the rule for network tests). Needs root and
`ip` (iproute2), both present where CI runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from powertrip.netem import Tc

SINK = textwrap.dedent(
    """
    import socket, sys, time
    server = socket.create_server((sys.argv[1], int(sys.argv[2])))
    print("ready", flush=True)
    connection, _ = server.accept()
    total, first, last = 0, None, None
    while chunk := connection.recv(1 << 16):
        now = time.perf_counter()
        first = first or now
        last = now
        total += len(chunk)
    print(total * 8 / (last - first), flush=True)
    """
)
SOURCE = textwrap.dedent(
    """
    import socket, sys
    with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as connection:
        connection.sendall(bytes(int(sys.argv[3])))
    """
)


@dataclass(frozen=True)
class NamespacePair:
    """`left` (device `left_device`, 10.213.x.1) and `right` (10.213.x.2), one veth between."""

    left: str
    right: str
    left_device: str
    left_address: str
    right_address: str

    def exec_prefix(self, namespace: str) -> tuple[str, ...]:
        """The command prefix that runs a program inside `namespace`."""
        return ("ip", "netns", "exec", namespace)

    def tc(self) -> Tc:
        """tc inside the left namespace."""
        return Tc(self.exec_prefix(self.left))

    def bits_per_s_left_to_right(self, total_bytes: int, port: int = 5201) -> float:
        """Measured rate of one TCP stream of `total_bytes` from left to right."""
        sink = subprocess.Popen(
            [
                *self.exec_prefix(self.right),
                sys.executable,
                "-c",
                SINK,
                self.right_address,
                str(port),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert sink.stdout is not None
            assert sink.stdout.readline().strip() == "ready"
            subprocess.run(
                [
                    *self.exec_prefix(self.left),
                    sys.executable,
                    "-c",
                    SOURCE,
                    self.right_address,
                    str(port),
                    str(total_bytes),
                ],
                check=True,
                timeout=60,
            )
            return float(sink.stdout.readline())
        finally:
            sink.kill()
            sink.wait()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def namespace_pair() -> Iterator[NamespacePair]:
    """Make the pair, yield it, and delete both namespaces (and with them the veth)."""
    tag = f"{os.getpid() % 100000}"
    left, right = f"ptl{tag}", f"ptr{tag}"
    subnet = f"10.213.{os.getpid() % 250}"
    _ip("netns", "add", left)
    try:
        _ip("netns", "add", right)
        try:
            _ip(
                "-n",
                left,
                "link",
                "add",
                "pt0",
                "type",
                "veth",
                "peer",
                "name",
                "pt1",
                "netns",
                right,
            )
            _ip("-n", left, "addr", "add", f"{subnet}.1/30", "dev", "pt0")
            _ip("-n", right, "addr", "add", f"{subnet}.2/30", "dev", "pt1")
            for namespace, device in ((left, "pt0"), (right, "pt1")):
                _ip("-n", namespace, "link", "set", device, "up")
                _ip("-n", namespace, "link", "set", "lo", "up")
            yield NamespacePair(left, right, "pt0", f"{subnet}.1", f"{subnet}.2")
        finally:
            _ip("netns", "del", right)
    finally:
        _ip("netns", "del", left)
