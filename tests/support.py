"""Builders shared by tests (on the pytest path: `from support import ...`)."""

import numpy as np

from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import SiteTable


def law_table(ids: list[str], distance_km: list[float], power: list[float]) -> SiteTable:
    """Sites with 8 x 700 W GPUs whose bandwidth follows the default law."""
    return SiteTable.from_arrays(
        ids,
        distance_km=distance_km,
        bandwidth_bytes_per_s=BandwidthLaw().bandwidth_bytes_per_s(np.asarray(distance_km)),
        gpus=8,
        gpu_power_w=700.0,
        power_available_ratio=power,
    )
