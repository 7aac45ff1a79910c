"""One-host deployment without Docker: the profiler and N sites as child processes on
127.0.0.1, each site behind a link-emulating proxy, and (for a job) the aggregator.

Site i takes its place and power from the embedded example sites (cycling through them with
seeded variations beyond twelve): its proxy delays by the fibre time of its distance and paces
at the bandwidth law's rate, and the site stretches compute by 1 / availability. Sites
register themselves with the profiler through their proxy's address, so the profiler's RTT
and bandwidth, and the aggregator's transfers, all cross the emulated links. Child output goes
to one log file per process; `stop` (and Ctrl-C) ends every child, SIGTERM first.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

import numpy as np

from powertrip.errors import PowerTripError
from powertrip.model.equations import BandwidthLaw
from powertrip.sites_file import parse_sites
from powertrip.transport.linkproxy import LinkProfile, LinkProxy

READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LocalSite:
    """Where and how strong an emulated site is."""

    site_id: str
    distance_km: float
    bandwidth_bytes_per_s: float
    power_available_ratio: float
    gpus: int
    gpu_power_w: float


def local_sites(count: int, seed: int = 0) -> list[LocalSite]:
    """`count` sites: the embedded example's, then seeded variations of them."""
    if count < 1:
        raise PowerTripError(f"--sites must be >= 1, got {count}")
    example = resources.files("powertrip.data").joinpath("example_sites.yaml")
    table = parse_sites(example.read_text(encoding="utf-8"), str(example))
    rng = np.random.default_rng(seed)
    law = BandwidthLaw()
    sites = []
    for i in range(count):
        j = i % len(table)
        distance = float(table.distance_km[j])
        power = float(table.power_available_ratio[j])
        suffix = ""
        if i >= len(table):
            distance *= float(rng.uniform(0.7, 1.3))
            power = float(np.clip(power * rng.uniform(0.7, 1.3), 0.05, 1.0))
            suffix = f"-{i // len(table) + 1}"
        sites.append(
            LocalSite(
                table.site_ids[j] + suffix,
                distance,
                float(law.bandwidth_bytes_per_s(distance)),
                power,
                int(table.gpus[j]),
                float(table.gpu_power_w[j]),
            )
        )
    return sites


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Child:
    """A service process and the lines it printed on stdout."""

    name: str
    process: subprocess.Popen[str]
    log: IO[str]
    lines: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)

    def read(self) -> None:
        """Forward stdout: JSON lines to `lines`, anything else to the log."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                self.log.write(line)
                continue
            if isinstance(event, dict):
                self.lines.put(event)
        self.lines.put({"event": "exit", "code": self.process.wait()})

    def next_event(self, timeout_s: float) -> dict[str, Any]:
        """The next JSON line (an `exit` event when the process ended)."""
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise PowerTripError(f"{self.name} said nothing for {timeout_s:.0f} s") from None

    def ready(self) -> dict[str, Any]:
        """Wait for the ready line."""
        event = self.next_event(READY_TIMEOUT_S)
        if event.get("event") != "ready":
            raise PowerTripError(
                f"{self.name} stopped before it was ready (exit {event.get('code')}); "
                f"see {self.log.name}"
            )
        return event


class LocalDeployment:
    """The profiler and sites (and later an aggregator) as children of this process."""

    def __init__(
        self,
        site_count: int,
        run_dir: Path,
        seed: int = 0,
        profile_period_s: float = 1.0,
        link_scale: float = 1.0,
    ) -> None:
        self.sites = local_sites(site_count, seed)
        self.run_dir = run_dir
        self.seed = seed
        self.profile_period_s = profile_period_s
        self.link_scale = link_scale
        self.children: dict[str, Child] = {}
        self.proxies: dict[str, LinkProxy] = {}
        self.site_ports: dict[str, int] = {}
        self.profiler_address = ""
        self.metrics: dict[str, int] = {}

    def spawn(self, name: str, *args: str) -> Child:
        """Start `python -m powertrip ARGS` as child `name`."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = (self.run_dir / f"{name}.log").open("a", encoding="utf-8")
        process = subprocess.Popen(
            [sys.executable, "-m", "powertrip", *args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        child = Child(name, process, log)
        threading.Thread(target=child.read, daemon=True).start()
        self.children[name] = child
        return child

    def start(self) -> LocalDeployment:
        """Start the profiler, every site's proxy and every site; wait until all are ready."""
        try:
            profiler = self.spawn(
                "profiler", "profiler", "--period-s", str(self.profile_period_s),
                "--bandwidth-bytes", str(2**20), "--metrics-port", "0",
            )  # fmt: skip
            ready = profiler.ready()
            self.profiler_address = f"127.0.0.1:{ready['port']}"
            self.metrics["profiler"] = int(ready["metrics_port"])
            for index in range(len(self.sites)):
                self.start_site(index, wait=False)
            for site in self.sites:
                self.metrics[site.site_id] = int(
                    self.children[site.site_id].ready()["metrics_port"]
                )
        except BaseException:
            self.stop()
            raise
        return self

    def start_site(self, index: int, wait: bool = True) -> Child:
        """Start (or restart, on the same port behind the same proxy) site `index`."""
        site = self.sites[index]
        port = self.site_ports.setdefault(site.site_id, free_port())
        if site.site_id not in self.proxies:
            link = LinkProfile.for_site(
                site.distance_km, site.bandwidth_bytes_per_s / self.link_scale
            )
            self.proxies[site.site_id] = LinkProxy("127.0.0.1", port, link).start()
        child = self.spawn(
            site.site_id, "site", "--id", site.site_id, "--index", str(index),
            "--count", str(len(self.sites)), "--seed", str(self.seed), "--port", str(port),
            "--advertise", self.proxies[site.site_id].address,
            "--profiler", self.profiler_address, "--distance-km", f"{site.distance_km:.3f}",
            "--gpus", str(site.gpus), "--gpu-power-w", str(site.gpu_power_w),
            "--power", f"{site.power_available_ratio:.4f}", "--metrics-port", "0",
        )  # fmt: skip
        if wait:
            self.metrics[site.site_id] = int(child.ready()["metrics_port"])
        return child

    def kill(self, name: str) -> None:
        """SIGKILL child `name` (tests: a crashed site)."""
        child = self.children[name]
        child.process.send_signal(signal.SIGKILL)
        child.process.wait(timeout=10)

    def aggregator(self, job_file: Path, linger_s: float = 0.0) -> Child:
        """Start the aggregator on `job_file`; its ready line is consumed here."""
        child = self.spawn(
            "aggregator", "aggregator", "--job", str(job_file), "--profiler", self.profiler_address,
            "--metrics-port", "0", "--linger-s", str(linger_s),
        )  # fmt: skip
        self.metrics["aggregator"] = int(child.ready()["metrics_port"])
        return child

    def aggregator_service(self, data_dir: Path, *extra: str) -> tuple[Child, dict[str, Any]]:
        """Start the aggregator serving the job API on a free port over `data_dir`; the child
        and its ready line (api_url, token_file)."""
        child = self.spawn(
            "aggregator", "aggregator", "--profiler", self.profiler_address, "--port", "0",
            "--data-dir", str(data_dir), *extra,
        )  # fmt: skip
        ready = child.ready()
        self.metrics["aggregator"] = int(ready["port"])
        return child, ready

    def scrape_targets(self) -> list[str]:
        """host:port of every /metrics endpoint."""
        return [f"127.0.0.1:{port}" for port in self.metrics.values()]

    def stop(self, timeout_s: float = 10.0) -> None:
        """End every child (SIGTERM, then SIGKILL after `timeout_s`) and every proxy."""
        for child in self.children.values():
            if child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + timeout_s
        for child in self.children.values():
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
            child.log.close()
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()

    def __enter__(self) -> LocalDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
