"""`powertrip link ...`: apply, show and clear a site's link shaping, and check what it achieves."""

from __future__ import annotations

import math
import statistics
from typing import Annotated

import typer
from rich.table import Table

from powertrip.cli.console import make_console
from powertrip.model.units import parse_size_bytes

app = typer.Typer(
    help="Shape a site's link with tc (netem, or tbf plus userspace delay) and check it.",
    no_args_is_help=True,
)

Device = Annotated[str, typer.Option(help="Network interface to shape, e.g. eth0.")]
DelayMs = Annotated[float, typer.Option(help="One-way delay, milliseconds.")]
RateMbit = Annotated[float | None, typer.Option(help="Rate, Mbit/s (default: unlimited).")]
LossPercent = Annotated[float, typer.Option(help="Packet loss, percent (needs netem).")]
MIN_DELAY_SLACK_S = 0.002  # scheduling and gRPC overhead a delay check forgives


@app.command()
def apply(
    device: Device,
    delay_ms: DelayMs = 0.0,
    rate_mbit: RateMbit = None,
    loss_percent: LossPercent = 0.0,
) -> None:
    """Shape DEVICE's egress (idempotent). Without netem, only the rate is shaped here and the
    delay is left to the site's userspace proxy: the output says which was applied."""
    from powertrip.netem import LinkShape, LinkShaper

    shape = LinkShape.from_units(delay_ms, rate_mbit, loss_percent)
    applied = LinkShaper(device).apply(shape)
    make_console().print(applied.describe(), highlight=False)
    if applied.userspace_delay_s:
        make_console(stderr=True).print(
            f"[bold yellow]warning:[/] the kernel adds no delay here; run the site with "
            f"--link-delay-ms {delay_ms:g} so its proxy adds it",
            highlight=False,
        )


@app.command()
def clear(device: Device) -> None:
    """Remove powertrip's shaping from DEVICE (idempotent; other tools' qdiscs stay)."""
    from powertrip.netem import LinkShaper

    removed = LinkShaper(device).clear()
    make_console().print(f"{device}: {'shaping removed' if removed else 'was not shaped'}")


@app.command()
def show(device: Device) -> None:
    """Print DEVICE's root qdisc."""
    from powertrip.netem import LinkShaper

    root = LinkShaper(device).root()
    owner = "powertrip" if root.is_ours else "kernel default" if root.is_default else "other"
    make_console().print(f"{device}: {root} ({owner})", highlight=False)


@app.command()
def check(
    site: Annotated[str, typer.Argument(help="host:port of the site's gRPC server.")],
    delay_ms: DelayMs = 0.0,
    rate_mbit: RateMbit = None,
    tolerance: Annotated[float, typer.Option(help="Allowed relative error.")] = 0.15,
    probe_size: Annotated[str, typer.Option(help="Bytes the bandwidth probe downloads.")] = "4MiB",
    echoes: Annotated[int, typer.Option(min=1, help="Echoes; the fastest is the link's RTT.")] = 9,
) -> None:
    """Measure a site's RTT and bandwidth as the profiler does and compare them with the
    configured profile; exit 1 when either is off by more than the tolerance."""
    from powertrip.profiler.profiler import SiteProbe

    probe = SiteProbe(site, timeout_s=120)
    try:
        samples = probe.rtt_samples_s(echoes, 64)
        rtt_s = statistics.median(samples)
        bandwidth = probe.bandwidth_bytes_per_s(int(parse_size_bytes(probe_size)), rtt_s)
    finally:
        probe.close()
    table = Table("", "configured", "achieved", "within")
    # The link's delay is the fastest round trip: queueing behind other traffic only adds.
    fastest = min(samples)
    wanted_rtt = 2 * delay_ms / 1e3
    rtt_ok = abs(fastest - wanted_rtt) <= max(tolerance * wanted_rtt, MIN_DELAY_SLACK_S)
    achieved_rtt = f"{fastest * 1e3:.1f} ms (median {rtt_s * 1e3:.1f})"
    table.add_row("round trip", f"{wanted_rtt * 1e3:.1f} ms", achieved_rtt, _yes(rtt_ok))
    achieved_mbit = bandwidth * 8 / 1e6
    rate_ok = rate_mbit is None or math.isclose(achieved_mbit, rate_mbit, rel_tol=tolerance)
    configured = "unlimited" if rate_mbit is None else f"{rate_mbit:g} Mbit/s"
    table.add_row("bandwidth", configured, f"{achieved_mbit:.2f} Mbit/s", _yes(rate_ok))
    make_console().print(table)
    print(f"rtt_ms={fastest * 1e3:.3f} bandwidth_mbit={achieved_mbit:.3f}")
    if not (rtt_ok and rate_ok):
        raise typer.Exit(1)


def _yes(ok: bool) -> str:
    return "yes" if ok else "[bold red]NO[/]"
