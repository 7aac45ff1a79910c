"""The services' clock: monotonic wall time (the simulator uses `SimulatedClock` instead)."""

import time


class WallClock:
    """Seconds from the monotonic system clock."""

    def now(self) -> float:
        """Now, in seconds since an arbitrary origin."""
        return time.monotonic()
