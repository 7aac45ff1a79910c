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
