"""Builders shared by tests (on the pytest path: `from support import ...`)."""

from typing import TYPE_CHECKING

import numpy as np

from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import SiteTable

if TYPE_CHECKING:
    from powertrip.sim.experiment import Experiment


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


def tiny_experiment(**overrides: object) -> "Experiment":
    """A seconds-long experiment: 6 sites on scikit-learn digits, one seed, few rounds."""
    from powertrip.sim.experiment import parse_experiment

    document: dict[str, object] = {
        "name": "tiny",
        "sites": {"count": 6},
        "task": {"name": "digits", "model": "mlp", "partition": "iid"},
        "timing": {"base_compute_time_s": 10},
        "policies": [{"name": "all"}],
        "seeds": 1,
        "target_accuracy": 0.5,
        "max_rounds": 4,
    }
    document.update(overrides)
    return parse_experiment(document, "tiny")
