"""Builders shared by tests (on the pytest path: `from support import ...`)."""

from typing import TYPE_CHECKING

import numpy as np

from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import SiteTable

if TYPE_CHECKING:
    import grpc

    from powertrip.sim.experiment import Experiment
    from powertrip.site.worker import SiteWorker


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


def serve(workers: "dict[str, SiteWorker]") -> "tuple[list[grpc.Server], dict[str, str]]":
    """Start a site server per worker on port 0; return the servers and their addresses."""
    from powertrip.site.server import SiteIdentity, SiteServicer, create_server

    servers, addresses = [], {}
    for site, worker in workers.items():
        server, port = create_server(SiteServicer(SiteIdentity(site), worker))
        server.start()
        servers.append(server)
        addresses[site] = f"127.0.0.1:{port}"
    return servers, addresses


class FakeNvml:
    """Just enough of pynvml for the power sources: a GPU of 100-700 W capped at 350 W
    (or the last limit set), drawing 250 W."""

    class NVMLError_NoPermission(Exception):  # noqa: N801, N818 - pynvml's class name
        """Raised like pynvml does without root."""

    def __init__(self, refuse: bool = False) -> None:
        self.limits: list[int] = []
        self.refuse = refuse

    def nvmlInit(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        return f"gpu{index}"

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: str) -> tuple[int, int]:  # noqa: N802
        return 100_000, 700_000

    def nvmlDeviceSetPowerManagementLimit(self, handle: str, limit_mw: int) -> None:  # noqa: N802
        if self.refuse:
            raise self.NVMLError_NoPermission()
        self.limits.append(limit_mw)

    def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:  # noqa: N802
        return self.limits[-1] if self.limits else 350_000

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:  # noqa: N802
        return 250_000
