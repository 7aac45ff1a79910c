"""`powertrip simulate` and `powertrip report`: run experiments, summarise their results.

Heavy imports (torch, matplotlib) happen inside the commands, so `powertrip --help` and the
selection commands start fast.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from powertrip.cli.console import make_console
from powertrip.errors import PowerTripError
from powertrip.yaml_text import parse_yaml

PRESETS = ("smoke", "paper-uniform", "paper-traces", "paper-update-sizes")


def preset_text(name: str) -> str:
    """The YAML text of a shipped preset."""
    if name not in PRESETS:
        raise typer.BadParameter(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return resources.files("powertrip.data.presets").joinpath(f"{name}.yaml").read_text()


def simulate(
    experiment: Annotated[
        Path | None, typer.Argument(help="Experiment YAML file (or use --preset).")
    ] = None,
    preset: Annotated[str | None, typer.Option(help=f"One of: {', '.join(PRESETS)}.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: out/<experiment name>).")
    ] = None,
    seeds: Annotated[
        int | None, typer.Option(min=1, help="Run only this many seeds (0..N-1).")
    ] = None,
) -> None:
    """Run real federated training over emulated sites in simulated time; write results.json,
    report.md and plots. Ctrl-C keeps every finished run; running again resumes."""
    from powertrip.rounds import JobState
    from powertrip.sim.experiment import ExperimentError, load_experiment, parse_experiment
    from powertrip.sim.report import write_report
    from powertrip.sim.runner import ResultsStore, WorldBuilder, plan_runs, run_one

    if (experiment is None) == (preset is None):
        raise typer.BadParameter("give an experiment file or --preset, not both or neither")
    if preset is not None:
        source = f"preset {preset}"
        config = parse_experiment(parse_yaml(preset_text(preset), source, ExperimentError), source)
    else:
        assert experiment is not None
        config = load_experiment(experiment)
    if seeds is not None:
        config = config.model_copy(update={"seeds": seeds})
    folder = out or Path("out") / config.name
    store = ResultsStore(folder, config)
    done = store.done()
    todo = [spec for spec in plan_runs(config) if spec.key not in done]
    console = make_console(stderr=True)
    if done:
        console.print(f"resuming {folder}: {len(done)} runs already finished")
    builder = WorldBuilder(config, folder / "cache")
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("runs", total=len(todo))
            for spec in todo:
                label = f"seed {spec.seed} {spec.label}"
                progress.update(task, description=label)

                def on_round(state: JobState, label: str = label) -> None:
                    text = f"{label}: round {len(state.records)} acc {state.accuracy:.3f}"
                    progress.update(task, description=text)

                store.add(run_one(config, spec, builder.world(spec.seed), on_round))
                progress.advance(task)
    except KeyboardInterrupt:
        console.print(
            f"interrupted: {len(store.document['runs'])} finished runs kept in {store.path}"
        )
        write_report(store.document, folder)
        sys.exit(130)
    report = write_report(store.document, folder)
    _print_summary(store.document)
    console.print(f"results: {store.path}\nreport:  {report}")


def report(
    folder: Annotated[Path, typer.Argument(help="An output folder of `powertrip simulate`.")],
) -> None:
    """Rewrite report.md and the plots of an output folder from its results.json."""
    from powertrip.sim.report import write_report

    path = folder / "results.json"
    try:
        results = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PowerTripError(f"{path}: cannot read results: {error}") from None
    written = write_report(results, folder)
    _print_summary(results)
    make_console(stderr=True).print(f"report: {written}")


def _print_summary(results: dict[str, object]) -> None:
    import numpy as np

    from powertrip.sim.report import summarize

    table = Table(title="time to accuracy (median over seeds)")
    for column in ("update", "policy", "TTA h", "reached", "rounds"):
        table.add_column(column)
    rows = sorted(summarize(results), key=lambda r: (r.update_size_bytes, r.median_hours))
    for row in rows:
        table.add_row(
            f"{row.update_size_bytes / 1e9:g} GB",
            row.label,
            f"{row.median_hours:.2f}",
            f"{row.reached}/{len(row.tta_hours)}",
            f"{float(np.median(row.rounds)):.0f}",
        )
    make_console().print(table)
