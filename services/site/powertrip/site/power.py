"""Where a site's power comes from: a `PowerSource` reports availability, draw and cap.

- `ConstantPowerSource`: a fixed availability (emulated sites, tests).
- `TraceReplayPowerSource`: spare power of a power-domain trace, replayed against the clock
  from an offset (one 5-minute trace step per `step_s` seconds of replay).
- `NvmlPowerSource`: a real GPU. Availability comes from a schedule (constant or trace); the
  source sets the GPU's power limit to availability x its maximum limit (clamped to the
  range the GPU accepts) and reads the real draw. nvidia-ml-py is imported only here, lazily.

Without a GPU the worker emulates the cap by stretching its measured compute time by
1 / availability (worker.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from powertrip.errors import PowerTripError
from powertrip.traces.google import PowerDomainTrace


class PowerError(PowerTripError, RuntimeError):
    """Power cannot be read or set (NVML failure, missing GPU)."""


@dataclass(frozen=True)
class PowerReading:
    """A site's power now: availability in (0, 1], draw and cap in watts, the source."""

    power_available_ratio: float
    power_w: float
    power_limit_w: float
    source: str


class PowerSource(Protocol):
    """Reports (and where it can, enforces) a site's power."""

    def read(self) -> PowerReading:
        """The power now."""
        ...


class ConstantPowerSource:
    """Fixed availability; draw is emulated as availability x capacity."""

    def __init__(self, ratio: float, capacity_w: float) -> None:
        if not 0 < ratio <= 1:
            raise PowerError(f"power availability must be in (0, 1], got {ratio}")
        self.ratio = ratio
        self.capacity_w = capacity_w

    def read(self) -> PowerReading:
        """The fixed reading."""
        watts = self.ratio * self.capacity_w
        return PowerReading(self.ratio, watts, watts, "constant")


class TraceReplayPowerSource:
    """Spare power of one power domain, advancing one trace step every `step_s` seconds."""

    def __init__(
        self,
        trace: PowerDomainTrace,
        capacity_w: float,
        offset_steps: int = 0,
        step_s: float = 300.0,
        floor_ratio: float = 0.01,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spare = trace.spare_ratio
        self.capacity_w = capacity_w
        self.offset_steps = offset_steps
        self.step_s = step_s
        # A domain at or over capacity has no spare power; a site still needs a positive
        # availability to report, so it runs at the floor and the profiler marks it weak.
        self.floor_ratio = floor_ratio
        self.clock = clock
        self.started_s = clock()

    def read(self) -> PowerReading:
        """Spare power of the current step."""
        step = (
            self.offset_steps + int((self.clock() - self.started_s) // self.step_s)
        ) % self.spare.size
        ratio = max(self.floor_ratio, float(self.spare[step]))
        watts = ratio * self.capacity_w
        return PowerReading(ratio, watts, watts, "trace")


# NVML errors mapped to what they mean for a site (one table, as in Zeus).
_NVML_MEANINGS = {
    "NVMLError_NoPermission": "setting a GPU power limit needs root or CAP_SYS_ADMIN",
    "NVMLError_NotSupported": "this GPU does not support reading or setting its power limit",
    "NVMLError_InvalidArgument": "the GPU refused the power limit",
    "NVMLError_GpuIsLost": "the GPU fell off the bus",
    "NVMLError_LibraryNotFound": "the NVIDIA driver library (libnvidia-ml) is not installed",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded",
}


def nvml_error(error: Exception, action: str) -> PowerError:
    """A `PowerError` saying what an NVML failure during `action` means."""
    meaning = _NVML_MEANINGS.get(type(error).__name__, str(error))
    return PowerError(f"NVML {action}: {meaning} ({type(error).__name__})")


@dataclass(frozen=True)
class NvmlGpu:
    """An initialised NVML GPU: the library, its handle, its power-limit range in mW."""

    nvml: Any
    handle: Any
    min_limit_mw: int
    max_limit_mw: int

    @classmethod
    def open(cls, gpu_index: int, nvml: Any = None) -> NvmlGpu:
        """Initialise NVML (nvidia-ml-py unless a stand-in is given) and GPU `gpu_index`."""
        if nvml is None:
            import pynvml  # nvidia-ml-py; only hosts with a GPU get here

            nvml = pynvml
        try:
            nvml.nvmlInit()
            handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index)
            low_mw, high_mw = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
        except Exception as error:  # every NVML error becomes a PowerError
            raise nvml_error(error, "initialisation") from None
        return cls(nvml, handle, int(low_mw), int(high_mw))


class NvmlPowerSource:
    """A real GPU's power, capped to availability x its maximum limit through NVML."""

    def __init__(self, schedule: PowerSource, gpu_index: int = 0, nvml: Any = None) -> None:
        gpu = NvmlGpu.open(gpu_index, nvml)
        self.nvml: Any = gpu.nvml
        self.handle = gpu.handle
        self.min_limit_mw, self.max_limit_mw = gpu.min_limit_mw, gpu.max_limit_mw
        self.schedule = schedule
        self._applied_mw: int | None = None

    def read(self) -> PowerReading:
        """Apply the scheduled cap (when it changed) and read the real draw."""
        ratio = self.schedule.read().power_available_ratio
        limit_mw = int(np.clip(ratio * self.max_limit_mw, self.min_limit_mw, self.max_limit_mw))
        try:
            if limit_mw != self._applied_mw:
                self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, limit_mw)
                self._applied_mw = limit_mw
            usage_mw = self.nvml.nvmlDeviceGetPowerUsage(self.handle)
        except Exception as error:
            raise nvml_error(error, "power limit / usage") from None
        return PowerReading(ratio, usage_mw / 1000.0, limit_mw / 1000.0, "nvml")
