"""Power sources the profiler reads itself, beside asking each site (site.proto Status):

- `DcgmPowerSource`: scrapes an NVIDIA DCGM exporter's Prometheus endpoint and sums
  DCGM_FI_DEV_POWER_USAGE (draw, W) and DCGM_FI_DEV_POWER_MGMT_LIMIT (cap, W) over the site's
  GPUs; availability is the cap over the site's maximum power.
- `NvmlPowerReader`: reads a local GPU's draw and cap through NVML without changing it (the
  profiler observes; only the site sets its own limit).
Trace replay is the site package's `TraceReplayPowerSource`, usable here unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from powertrip.site.power import NvmlGpu, PowerError, PowerReading, nvml_error

DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
DCGM_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"


def parse_dcgm(text: str, gpus: frozenset[str] | None = None) -> tuple[float, float, int]:
    """Total draw and cap in watts and the GPU count in a DCGM exporter's /metrics text,
    over the GPUs whose `gpu` label is in `gpus` (None: all)."""
    draw: dict[str, float] = {}
    limit: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            target = {DCGM_POWER: draw, DCGM_LIMIT: limit}.get(family.name)
            if target is None:
                continue
            for sample in family.samples:
                gpu = sample.labels.get("gpu", sample.labels.get("UUID", "0"))
                if gpus is None or gpu in gpus:
                    target[gpu] = float(sample.value)
    except ValueError as error:
        raise PowerError(f"DCGM exporter output is not Prometheus text: {error}") from None
    if not draw:
        raise PowerError(f"DCGM exporter reports no {DCGM_POWER} for GPUs {sorted(gpus or [])}")
    values = [*draw.values(), *limit.values()]
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise PowerError(f"DCGM exporter reports an impossible power value: {values}")
    # Without a limit metric (older exporters' default counters) the draw stands in for it.
    total_limit = sum(limit.get(gpu, value) for gpu, value in draw.items())
    return sum(draw.values()), total_limit, len(draw)


class DcgmPowerSource:
    """A site's power from its DCGM exporter at `url` (…/metrics). The site's maximum power
    (GPUs x power per GPU) is given, or taken from the site's description by the profiler."""

    def __init__(
        self,
        url: str,
        max_power_w: float | None = None,
        gpus: frozenset[str] | None = None,
        timeout_s: float = 2.0,
        client: httpx.Client | None = None,
    ) -> None:
        if max_power_w is not None and not max_power_w > 0:
            raise PowerError(f"the site's maximum power must be > 0 W, got {max_power_w}")
        self.url = url
        self.max_power_w = max_power_w
        self.gpus = gpus
        self.client = client or httpx.Client(timeout=timeout_s)

    def read(self) -> PowerReading:
        """Scrape now; availability = summed cap / the site's maximum, at most 1."""
        try:
            response = self.client.get(self.url)
            response.raise_for_status()
        except httpx.HTTPError as error:
            raise PowerError(f"cannot scrape the DCGM exporter at {self.url}: {error}") from None
        draw_w, limit_w, _ = parse_dcgm(response.text, self.gpus)
        if self.max_power_w is None:
            raise PowerError(f"the maximum power of the site behind {self.url} is not known yet")
        ratio = min(1.0, limit_w / self.max_power_w)
        if ratio <= 0:
            raise PowerError(f"DCGM exporter at {self.url} reports a power cap of 0 W")
        return PowerReading(ratio, draw_w, limit_w, "dcgm")


class NvmlPowerReader:
    """A local GPU's draw and cap through NVML, read-only."""

    def __init__(self, gpu_index: int = 0, nvml: Any = None) -> None:
        gpu = NvmlGpu.open(gpu_index, nvml)
        self.nvml: Any = gpu.nvml
        self.handle = gpu.handle
        self.max_limit_mw = gpu.max_limit_mw

    def read(self) -> PowerReading:
        """Draw and the current cap; availability = cap / the GPU's maximum cap."""
        try:
            usage_mw = self.nvml.nvmlDeviceGetPowerUsage(self.handle)
            limit_mw = self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle)
        except Exception as error:
            raise nvml_error(error, "power usage / limit") from None
        return PowerReading(
            limit_mw / self.max_limit_mw, usage_mw / 1000.0, limit_mw / 1000.0, "nvml"
        )
