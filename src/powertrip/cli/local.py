"""`powertrip up` and `powertrip demo`: the whole system on this host, without Docker."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from powertrip.cli.console import make_console
from powertrip.errors import PowerTripError
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
    run_dir: Annotated[Path, typer.Option(help="Where logs go.")] = Path("out/demo"),
    seed: Annotated[int, typer.Option(help="Seed of data, model and policy.")] = 0,
) -> None:
    """Start the system on this host, train with the PowerTrip policy, show every round."""
    console = make_console()
    stop = stop_on_signals()
    run_dir.mkdir(parents=True, exist_ok=True)
    job = run_dir / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job_id": "demo",
                "policy": {"name": policy},
                "target_accuracy": target_accuracy,
                "max_rounds": max_rounds,
                "seed": seed,
            }
        )
    )
    console.print(f"starting the profiler and {sites} sites (logs in {run_dir}/) ...")
    with LocalDeployment(sites, run_dir, seed) as deployment:
        aggregator = deployment.aggregator(job)
        table = Table(title=f"job 'demo': {policy} policy, target {target_accuracy:.0%}")
        for column in ("round", "sites", "accuracy", "round s", "compute s", "comm s", "selected"):
            table.add_column(column)
        done: dict[str, Any] = {}
        while not stop.is_set():
            try:
                event = aggregator.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if event["event"] == "round":
                console.print(
                    f"round {event['round']:>3}  {len(event['selected']):>2} sites  "
                    f"accuracy {event['accuracy']:.3f}  round {event['round_time_s']:.2f} s "
                    f"(compute {event['compute_s']:.2f}, comm {event['communication_s']:.2f})  "
                    f"{', '.join(event['selected'])}"
                    + (f"  dropped {[d[0] for d in event['dropped']]}" if event["dropped"] else ""),
                    highlight=False,
                )
                table.add_row(
                    str(event["round"]), str(len(event["selected"])), f"{event['accuracy']:.3f}",
                    f"{event['round_time_s']:.2f}", f"{event['compute_s']:.2f}",
                    f"{event['communication_s']:.2f}", ", ".join(event["selected"]),
                )  # fmt: skip
            elif event["event"] == "done":
                done = event
            elif event["event"] == "exit":
                break
        if stop.is_set():
            console.print("stopped: every process of the demo is shut down")
            return
        if not done:
            raise PowerTripError(f"the aggregator stopped early; see {run_dir}/aggregator.log")
        console.print(table)
        tta = done["time_to_accuracy_s"]
        console.print(
            f"[bold]{'reached' if done['reached'] else 'did not reach'}[/] "
            f"{done['target_accuracy']:.0%} "
            + (f"in {tta:.1f} s " if tta is not None else "")
            + f"after {done['rounds']} rounds; final accuracy {done['accuracy']:.3f}"
        )
