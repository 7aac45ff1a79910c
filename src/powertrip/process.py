"""What every service process does the same way: announce where it listens, stop on a signal."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any


def announce(**fields: Any) -> None:
    """One JSON line on stdout saying what the process serves (a launcher reads it to learn
    the ports chosen when it asked for port 0)."""
    sys.stdout.write(json.dumps({"event": "ready", **fields}) + "\n")
    sys.stdout.flush()


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (call from the main thread)."""
    stop = threading.Event()

    def handle(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


M_MMAP_THRESHOLD = -3  # glibc <malloc.h>
LARGE_BUFFER_BYTES = 2**20


def return_large_buffers_to_the_os() -> bool:
    """Make glibc serve every allocation of 1 MiB or more with its own mmap, returned to the
    system when freed. By default glibc raises this threshold after the first such free, so
    the 4 MiB chunk buffers of many concurrent streams settle in per-thread heaps that never
    shrink: measured on the aggregator, 8 concurrent 256 MiB updates peaked at 3.4-4.3 x
    the model this way and at 2.4 x with the fixed threshold (benchmarks/aggregate_memory.py).
    Whether it could be applied (glibc only)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if sys.platform != "linux" or name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))
    except (OSError, AttributeError):
        return False
