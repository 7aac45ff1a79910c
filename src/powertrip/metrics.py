"""Prometheus metrics shared by every service (names per DESIGN §7: base units, `_total`
counters, `site_id` and `training_job` labels, never `job`, `instance` or `site`)."""

from __future__ import annotations

from dataclasses import dataclass
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from powertrip.errors import PowerTripError

SITE_POWER_AVAILABLE = "powertrip_site_power_available_ratio"
SITE_POWER_WATTS = "powertrip_site_power_watts"
SITE_ENERGY = "powertrip_site_energy_joules"  # a counter: exposed with `_total`
SITE_RTT = "powertrip_site_rtt_seconds"
SITE_BANDWIDTH = "powertrip_site_bandwidth_bytes_per_second"
SITE_UP = "powertrip_site_up"
TRANSFER_BYTES = "powertrip_transfer_bytes"  # a counter: exposed with `_total`


@dataclass
class MetricsServer:
    """A running /metrics endpoint."""

    server: WSGIServer
    thread: Thread
    port: int

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(
    registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0
) -> MetricsServer:
    """Serve `registry` at http://host:port/metrics (port 0: any free port)."""
    try:
        server, thread = start_http_server(port, host, registry)
    except OSError as error:
        raise PowerTripError(f"cannot serve metrics on {host}:{port}: {error}") from None
    return MetricsServer(server, thread, server.server_port)
