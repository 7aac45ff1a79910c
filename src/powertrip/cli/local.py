"""`powertrip up` and `powertrip demo`: the whole system on this host, without Docker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from powertrip.cli.console import make_console
from powertrip.local import LocalDeployment
from powertrip.process import stop_on_signals


def up(
    sites: Annotated[int, typer.Option(help="How many site processes.")] = 4,
    run_dir: Annotated[Path, typer.Option(help="Where logs go.")] = Path("out/local"),
    seed: Annotated[int, typer.Option(help="Seed of the sites' data and variations.")] = 0,
    prometheus_targets: Annotated[
        Path | None, typer.Option(help="Write the /metrics endpoints here (Prometheus file_sd).")
    ] = None,
) -> None:
    """Start the profiler and N sites on 127.0.0.1 with emulated links; Ctrl-C stops all."""
    console = make_console()
    stop = stop_on_signals()
    with LocalDeployment(sites, run_dir, seed) as deployment:
        table = Table(title=f"PowerTrip on this host: profiler + {sites} sites")
        for column in ("service", "gRPC", "metrics", "distance km", "link MB/s", "power"):
            table.add_column(column)
        table.add_row(
            "profiler", deployment.profiler_address,
            f"http://127.0.0.1:{deployment.metrics['profiler']}/metrics", "", "", "",
        )  # fmt: skip
        for site in deployment.sites:
            table.add_row(
                site.site_id,
                deployment.proxies[site.site_id].address,
                f"http://127.0.0.1:{deployment.metrics[site.site_id]}/metrics",
                f"{site.distance_km:,.0f}",
                f"{site.bandwidth_bytes_per_s / 1e6:,.0f}",
                f"{site.power_available_ratio:.0%}",
            )
        console.print(table)
        if prometheus_targets is not None:
            write_targets(prometheus_targets, deployment.scrape_targets())
        console.print(f"logs in {run_dir}/; run a job with `powertrip aggregator --profiler "
                      f"{deployment.profiler_address}`; Ctrl-C stops everything")  # fmt: skip
        stop.wait()


def write_targets(path: Path, targets: list[str]) -> None:
    """A Prometheus file_sd document listing `targets`."""
    path.write_text(json.dumps([{"targets": targets, "labels": {"deployment": "local"}}]))


def demo(
    sites: Annotated[int, typer.Option(help="How many site processes.")] = 6,
    policy: Annotated[str, typer.Option(help="Selection policy.")] = "powertrip",
    target_accuracy: Annotated[float, typer.Option(help="Stop at this accuracy.")] = 0.85,
    max_rounds: Annotated[int, typer.Option(help="Round budget.")] = 30,
    run_dir: Annotated[Path, typer.Option(help="Where logs and the demo's job data go.")] = Path(
        "out/demo"
    ),
    seed: Annotated[int, typer.Option(help="Seed of data, model and policy.")] = 0,
) -> None:
    """Start the system on this host, submit a job to the aggregator's REST API, and watch it
    round by round (the job data of earlier demos in RUN_DIR/data is discarded)."""
    from powertrip.aggregator.client import ApiClient
    from powertrip.cli.jobs import watch_job

    console = make_console()
    stop = stop_on_signals()
    data_dir = run_dir / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    console.print(
        f"starting the profiler, {sites} sites and the aggregator (logs in {run_dir}/) ..."
    )
    with LocalDeployment(sites, run_dir, seed) as deployment:
        _, ready = deployment.aggregator_service(data_dir)
        token = Path(ready["token_file"]).read_text(encoding="utf-8").strip()
        with ApiClient(ready["api_url"], token) as client:
            job = client.submit(
                {
                    "policy": {"name": policy},
                    "target_accuracy": target_accuracy,
                    "max_rounds": max_rounds,
                    "seed": seed,
                }
            )
            console.print(
                f"submitted job [bold]{job['id']}[/] to {ready['api_url']} "
                f"({policy} policy, target {target_accuracy:.0%}); the API's docs are at "
                f"{ready['api_url']}/docs"
            )
            watch_job(client, job["id"], console, stop=stop)
        if stop.is_set():
            console.print("stopped: every process of the demo is shut down")
