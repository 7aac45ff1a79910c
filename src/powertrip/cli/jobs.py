"""`powertrip submit | jobs | watch | cancel`: the job API from the command line (httpx).

The API's address comes from --url or POWERTRIP_API_URL; the token from --token,
POWERTRIP_API_TOKEN, or the token file an aggregator writes into its data folder.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from powertrip.cli.console import make_console
from powertrip.errors import PowerTripError
from powertrip.yaml_text import parse_yaml

if TYPE_CHECKING:
    from powertrip.aggregator.client import ApiClient

Url = Annotated[str, typer.Option(envvar="POWERTRIP_API_URL", help="The aggregator's job API.")]
Token = Annotated[
    str | None,
    typer.Option(envvar="POWERTRIP_API_TOKEN", show_default=False, help="API token."),
]
TokenFile = Annotated[
    Path, typer.Option(help="Read the token from this file when --token is not given.")
]
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TOKEN_FILE = Path("powertrip-data/api-token")
FINISHED = ("succeeded", "failed", "cancelled")


def connect(url: str, token: str | None, token_file: Path) -> ApiClient:
    """A client of the API at `url`, with the token given or the one in `token_file`."""
    from powertrip.aggregator.client import ApiClient

    if token is None and token_file.is_file():
        token = token_file.read_text(encoding="utf-8").strip() or None
    return ApiClient(url, token)


def submit(
    job: Annotated[Path, typer.Argument(help="Job YAML: task, model, policy, target, ...")],
    watch_it: Annotated[bool, typer.Option("--watch", help="Then watch it to its end.")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
    token_file: TokenFile = DEFAULT_TOKEN_FILE,
) -> None:
    """Submit a training job to the aggregator; prints its id."""
    try:
        document = parse_yaml(job.read_text(encoding="utf-8"), str(job), PowerTripError) or {}
    except OSError as error:
        raise PowerTripError(f"{job}: cannot read the job file: {error.strerror}") from None
    if not isinstance(document, dict):
        raise PowerTripError(
            f"{job}: a job is a mapping of settings, got {type(document).__name__}"
        )
    with connect(url, token, token_file) as client:
        created = client.submit(document)
        console = make_console()
        console.print(f"submitted job [bold]{created['id']}[/] ({created['state']})")
        if watch_it:
            raise typer.Exit(exit_code(watch_job(client, created["id"], console)))


def jobs(
    state: Annotated[str | None, typer.Option(help="Only jobs in this state.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many, newest first.")] = 20,
    url: Url = DEFAULT_URL,
    token: Token = None,
    token_file: TokenFile = DEFAULT_TOKEN_FILE,
) -> None:
    """List jobs, newest first."""
    with connect(url, token, token_file) as client:
        page = client.jobs(state, limit=limit)
    table = Table(title="jobs")
    for column in ("id", "state", "round", "accuracy", "target", "policy", "created", "reason"):
        table.add_column(column)
    for job in page["items"]:
        spec = job["spec"]
        table.add_row(
            job["id"], job["state"], f"{job['current_round']}/{spec['max_rounds']}",
            _accuracy(job["accuracy"]), f"{spec['target_accuracy']:g}", spec["policy"]["name"],
            datetime.fromisoformat(job["created_at"]).strftime("%Y-%m-%d %H:%M:%S"),
            job["reason"],
        )  # fmt: skip
    make_console().print(table)


def watch(
    job_id: Annotated[str, typer.Argument(help="The job's id.")],
    url: Url = DEFAULT_URL,
    token: Token = None,
    token_file: TokenFile = DEFAULT_TOKEN_FILE,
) -> None:
    """Follow a job round by round until it ends (exit 0 if it reached its target)."""
    with connect(url, token, token_file) as client:
        raise typer.Exit(exit_code(watch_job(client, job_id, make_console())))


def cancel(
    job_id: Annotated[str, typer.Argument(help="The job's id.")],
    url: Url = DEFAULT_URL,
    token: Token = None,
    token_file: TokenFile = DEFAULT_TOKEN_FILE,
) -> None:
    """Cancel a job (a running one stops mid-round, keeping its whole rounds)."""
    with connect(url, token, token_file) as client:
        job = client.cancel(job_id)
    state = "cancelled" if job["state"] == "cancelled" else "cancelling after its current round"
    make_console().print(f"job {job_id}: {state}")


def exit_code(job: dict[str, Any]) -> int:
    """0 when the job succeeded."""
    return 0 if job["state"] == "succeeded" else 1


def watch_job(
    client: ApiClient,
    job_id: str,
    console: Console,
    poll_s: float = 0.5,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Print each round as it lands under a live status line; the job once it has ended (or
    as it is when `stop` is set). Ctrl-C stops watching, not the job."""
    stop = stop or threading.Event()
    seen = 0
    job = client.job(job_id)
    try:
        with Live(_status(job), console=console, refresh_per_second=4, transient=True) as live:
            while True:
                for record in client.rounds_after(job_id, seen):
                    live.console.print(_round_line(record), highlight=False)
                    seen = record["round_index"]
                job = client.job(job_id)
                live.update(_status(job))
                if job["state"] in FINISHED and job["current_round"] <= seen:
                    break
                if stop.wait(poll_s):
                    return job
    except KeyboardInterrupt:
        console.print(f"stopped watching; job {job_id} goes on (powertrip cancel {job_id})")
        raise typer.Exit(130) from None
    console.print(_summary(job))
    return job


def _status(job: dict[str, Any]) -> Group:
    spec = job["spec"]
    target = spec["target_accuracy"]
    accuracy = job["accuracy"] or 0.0
    line = Text.assemble(
        (f"job {job['id']} ", "bold"),
        f"{job['state']}  round {job['current_round']}/{spec['max_rounds']}  ",
        f"accuracy {_accuracy(job['accuracy'])} of {target:g}  ",
        f"{job['elapsed_s']:.1f} s  sites: {', '.join(job['selected_sites']) or '-'}",
    )
    return Group(line, ProgressBar(total=target, completed=min(accuracy, target), width=60))


def _round_line(record: dict[str, Any]) -> str:
    dropped = [site for site, _ in record["dropped"]]
    return (
        f"round {record['round_index']:>3}  {len(record['selected_site_ids']):>2} sites  "
        f"accuracy {record['accuracy']:.3f}  round {record['round_time_s']:.2f} s "
        f"(compute {record['compute_time_s']:.2f}, comm {record['communication_time_s']:.2f})  "
        + ", ".join(record["selected_site_ids"])
        + (f"  dropped {dropped}" if dropped else "")
    )


def _summary(job: dict[str, Any]) -> str:
    tta = job["time_to_accuracy_s"]
    reached = f"reached its target in {tta:.1f} s; " if tta is not None else ""
    return (
        f"[bold]job {job['id']} {job['state']}[/]: {job['reason']}\n"
        f"{reached}{job['current_round']} rounds, final accuracy {_accuracy(job['accuracy'])}"
    )


def _accuracy(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
