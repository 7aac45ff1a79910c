"""`powertrip` commands. Settings come from options; nothing is built at import time."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from powertrip.cli import deploy, jobs, link, local, services
from powertrip.cli.console import make_console
from powertrip.cli.ranking_table import ranking_table, select_once
from powertrip.cli.simulate import report, simulate
from powertrip.errors import PowerTripError
from powertrip.model.units import parse_size_bytes
from powertrip.selection import POLICY_NAMES, RoundView
from powertrip.sites_file import load_sites_file, parse_sites

app = typer.Typer(
    help="PowerTrip: choose which power-limited datacenters train each round.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEMO_POLICIES: tuple[dict[str, Any], ...] = (
    {"name": "powertrip"},
    {"name": "static-k", "k": 4, "ranker": "power-to-cost"},
    {"name": "static-k", "k": 4, "ranker": "highest-power"},
    {"name": "static-k", "k": 4, "ranker": "lowest-latency"},
    {"name": "fixed-radius"},
    {"name": "centralized", "power_cap_ratio": 0.25},
    {"name": "random-k", "k": 4},
    {"name": "all"},
)


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """`["k=70", "ranker=highest-power"]` -> settings; a malformed pair is an error."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--set")
        settings[key.strip()] = value.strip()
    return settings


@app.command()
def rank(
    sites: Annotated[Path, typer.Option(help="Sites file (YAML or JSON).")],
    policy: Annotated[
        str, typer.Option(help=f"Policy name: {', '.join(POLICY_NAMES)}.")
    ] = "powertrip",
    setting: Annotated[
        list[str] | None,
        typer.Option("--set", help="A policy setting as KEY=VALUE; repeatable."),
    ] = None,
    update_size: Annotated[
        str, typer.Option(help="Update size per transfer: 1GB, 1.5GB, 2GB, 512MiB, ...")
    ] = "1.5GB",
    seed: Annotated[int, typer.Option(help="Seed of the random ranker and random-k.")] = 0,
    limit: Annotated[int, typer.Option(min=1, help="Rows to show at most.")] = 100,
) -> None:
    """Rank the sites of a file and show which ones a policy selects for its first round."""
    view = RoundView(load_sites_file(sites), parse_size_bytes(update_size))
    config = {"name": policy, **parse_settings(setting or [])}
    make_console().print(ranking_table(select_once(view, config, seed), limit))


@app.command()
def policies(
    update_size: Annotated[str, typer.Option(help="Update size per transfer.")] = "1.5GB",
) -> None:
    """Show, on the embedded twelve-site example, which sites every policy picks and why."""
    example = resources.files("powertrip.data").joinpath("example_sites.yaml")
    view = RoundView(
        parse_sites(example.read_text(encoding="utf-8"), source=str(example)),
        parse_size_bytes(update_size),
    )
    console = make_console()
    reports = [select_once(view, config, seed=0) for config in DEMO_POLICIES]
    console.print(ranking_table(reports[0], limit=len(view.sites)))
    summary = Table(title="first-round selection of every policy")
    for column in ("policy", "settings", "sites", "slowest link s", "mean power", "selected"):
        summary.add_column(column)
    for config, chosen_by in zip(DEMO_POLICIES, reports, strict=True):
        chosen = chosen_by.selection.site_indices
        summary.add_row(
            chosen_by.policy_name,
            ", ".join(f"{k}={v}" for k, v in config.items() if k != "name") or "defaults",
            str(len(chosen)),
            f"{view.communication_time_s[chosen].max():.2f}",
            f"{view.sites.power_available_ratio[chosen].mean():.0%}",
            ", ".join(view.sites.ids_at(chosen)),
        )
    console.print(summary)


app.command()(simulate)
app.command()(report)
app.command()(services.site)
app.command()(services.profiler)
app.command()(services.aggregator)
app.command()(local.up)
app.command()(local.demo)
app.command()(jobs.submit)
app.command()(jobs.jobs)
app.command()(jobs.watch)
app.command()(jobs.cancel)
app.add_typer(link.app, name="link")
app.add_typer(deploy.app, name="deploy")


def main() -> None:
    """Console entry point: run the app, turning PowerTrip errors into one clear line."""
    try:
        app()
    except PowerTripError as error:
        make_console(stderr=True).print(f"[bold red]error:[/] {error}", highlight=False)
        sys.exit(2)
