"""`powertrip site | profiler | aggregator`: run one service process in the foreground.

Each prints one JSON `ready` line on stdout once it listens (with the ports it bound when
asked for port 0) and stops cleanly on SIGTERM or Ctrl-C. Service code is imported inside
the commands, so `powertrip --help` stays fast.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from powertrip.errors import PowerTripError
from powertrip.process import stop_on_signals
from powertrip.yaml_text import parse_yaml

if TYPE_CHECKING:
    from pydantic import ValidationError

    from powertrip.aggregator.job import JobFile

Host = Annotated[str, typer.Option(help="Address to listen on.")]
Port = Annotated[int, typer.Option(help="gRPC port (0: any free port).")]
MetricsPort = Annotated[
    int | None, typer.Option(help="Serve /metrics on this port (0: any free port).")
]
LogLevel = Annotated[str, typer.Option(help="Logging level.")]


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def site(
    site_id: Annotated[str, typer.Option("--id", help="The site's id.")],
    index: Annotated[int, typer.Option(help="This site's shard among --count.")] = 0,
    count: Annotated[int, typer.Option(help="How many shards the data is split into.")] = 1,
    task: Annotated[str, typer.Option(help="Task whose training data the site holds.")] = "mnist",
    model: Annotated[str, typer.Option(help="Model architecture.")] = "mlp",
    data_dir: Annotated[Path | None, typer.Option(help="Folder of the task's files.")] = None,
    partition: Annotated[str, typer.Option(help="iid, dirichlet or natural.")] = "dirichlet",
    seed: Annotated[int, typer.Option(help="Seed of the partition and the model.")] = 0,
    host: Host = "127.0.0.1",
    port: Port = 0,
    advertise: Annotated[
        str | None, typer.Option(help="host:port others reach this site at (e.g. its link proxy).")
    ] = None,
    profiler: Annotated[
        str | None, typer.Option(help="host:port of the profiler to register with.")
    ] = None,
    distance_km: Annotated[float, typer.Option(help="Distance to the aggregator.")] = 0.0,
    gpus: Annotated[int, typer.Option(help="GPUs at the site.")] = 1,
    gpu_power_w: Annotated[float, typer.Option(help="Power of one GPU, watts.")] = 300.0,
    power: Annotated[float, typer.Option(help="Constant power availability in (0, 1].")] = 1.0,
    power_trace: Annotated[
        Path | None, typer.Option(help="Folder of Google power traces to replay instead.")
    ] = None,
    trace_domain: Annotated[int, typer.Option(help="Which power domain of the folder.")] = 0,
    trace_offset: Annotated[int, typer.Option(help="Trace step to start at.")] = 0,
    trace_step_s: Annotated[float, typer.Option(help="Seconds per 5-minute trace step.")] = 300.0,
    gpu_index: Annotated[
        int | None,
        typer.Option(
            help="Cap this GPU's power through NVML (real GPU sites).",
            envvar="POWERTRIP_SITE_GPU_INDEX",
        ),
    ] = None,
    device: Annotated[
        str, typer.Option(help="torch device: cpu or cuda:N.", envvar="POWERTRIP_SITE_DEVICE")
    ] = "cpu",
    link_delay_ms: Annotated[
        float | None, typer.Option(help="Emulate this one-way link delay (default: none).")
    ] = None,
    link_rate_mbit: Annotated[
        float | None, typer.Option(help="Emulate this link rate, Mbit/s (default: unlimited).")
    ] = None,
    link_loss_percent: Annotated[
        float | None, typer.Option(help="Emulate this packet loss (needs netem).")
    ] = None,
    link_device: Annotated[
        str | None,
        typer.Option(help="Shape this interface with tc (needs NET_ADMIN); else all in userspace."),
    ] = None,
    metrics_port: MetricsPort = None,
    log_level: LogLevel = "info",
) -> None:
    """Run a site worker: its data shard, local training, power, probes, and its link."""
    from powertrip.netem import LinkShape
    from powertrip.site.main import SiteSettings, run_site
    from powertrip.site.server import SiteIdentity
    from powertrip.site.worker import ShardSpec

    _logging(log_level)
    emulated = (link_delay_ms, link_rate_mbit, link_loss_percent)
    link = None
    if any(value is not None for value in emulated):
        link = LinkShape.from_units(link_delay_ms or 0.0, link_rate_mbit, link_loss_percent or 0.0)
    stop = stop_on_signals()
    settings = SiteSettings(
        identity=SiteIdentity(site_id, distance_km, gpus, gpu_power_w),
        shard=ShardSpec(task, model, data_dir, seed, index, count, partition),
        host=host,
        port=port,
        advertise=advertise,
        profiler=profiler,
        power_available_ratio=power,
        power_trace=power_trace,
        trace_domain=trace_domain,
        trace_offset_steps=trace_offset,
        trace_step_s=trace_step_s,
        gpu_index=gpu_index,
        device=device,
        metrics_port=metrics_port,
        link=link,
        link_device=link_device,
    )
    run_site(settings, stop)


def profiler(
    host: Host = "127.0.0.1",
    port: Port = 0,
    period_s: Annotated[float, typer.Option(help="Seconds between polls of every site.")] = 2.0,
    bandwidth_bytes: Annotated[int, typer.Option(help="Size of the bandwidth probe.")] = 4 * 2**20,
    bandwidth_every: Annotated[int, typer.Option(help="Probe bandwidth every N polls.")] = 5,
    dcgm: Annotated[
        list[str] | None,
        typer.Option(help="SITE=URL: read SITE's power from its DCGM exporter; repeatable."),
    ] = None,
    nvml: Annotated[
        list[str] | None,
        typer.Option(help="SITE=GPU: read SITE's power from this host's GPU; repeatable."),
    ] = None,
    metrics_port: MetricsPort = None,
    log_level: LogLevel = "info",
) -> None:
    """Run the profiler: polls every site's power, RTT and bandwidth."""
    from powertrip.profiler.main import ProfilerProcessSettings, run_profiler
    from powertrip.profiler.power import DcgmPowerSource, NvmlPowerReader
    from powertrip.profiler.profiler import ProfilerSettings
    from powertrip.site.power import PowerSource

    _logging(log_level)
    sources: dict[str, PowerSource] = {}
    for pair in dcgm or []:
        site_id, sep, url = pair.partition("=")
        if not sep or not site_id or not url.startswith(("http://", "https://")):
            raise typer.BadParameter(
                f"{pair!r} is not SITE=http://host:port/metrics", param_hint="--dcgm"
            )
        sources[site_id] = DcgmPowerSource(url)  # maximum power: from the site's description
    for pair in nvml or []:
        site_id, sep, index = pair.partition("=")
        if not sep or not site_id or not index.isdigit():
            raise typer.BadParameter(f"{pair!r} is not SITE=GPU_INDEX", param_hint="--nvml")
        sources[site_id] = NvmlPowerReader(int(index))
    stop = stop_on_signals()
    settings = ProfilerProcessSettings(
        probing=ProfilerSettings(
            period_s=period_s, bandwidth_bytes=bandwidth_bytes, bandwidth_every=bandwidth_every
        ),
        host=host,
        port=port,
        metrics_port=metrics_port,
        power_sources=sources,
    )
    run_profiler(settings, stop)


def aggregator(
    profiler: Annotated[str, typer.Option(help="host:port of the profiler.")],
    job: Annotated[
        Path | None,
        typer.Option(help="Run this one job file and exit, instead of serving the job API."),
    ] = None,
    sites: Annotated[
        Path | None, typer.Option(help="Sites file whose sites (with an address) to register.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address of the API (and of /metrics).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the job API (0: any free port).")] = 8080,
    data_dir: Annotated[
        Path, typer.Option(help="Where jobs, rounds, checkpoints and the API token live.")
    ] = Path("powertrip-data"),
    token: Annotated[
        str | None,
        typer.Option(
            envvar="POWERTRIP_API_TOKEN",
            show_default=False,
            help="API token (default: DATA_DIR/api-token, made on first start).",
        ),
    ] = None,
    auth_reads: Annotated[bool, typer.Option(help="Require the token on reads too.")] = False,
    max_concurrent_jobs: Annotated[int, typer.Option(min=1, help="Jobs running at once.")] = 1,
    checkpoint_every: Annotated[
        int, typer.Option(min=1, help="Checkpoint the model every N rounds (and at the end).")
    ] = 1,
    datasets_dir: Annotated[
        Path | None, typer.Option(help="Folder with one sub-folder per file-based task.")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="--job only: serve /metrics on this port (0: any).")
    ] = None,
    linger_s: Annotated[
        float, typer.Option(help="--job only: keep /metrics up this long after.")
    ] = 0.0,
    log_level: LogLevel = "info",
) -> None:
    """Serve the REST job API (jobs queue, run and resume after a restart), or with --job run
    one job file and print every round as a JSON line."""
    _logging(log_level)
    if job is None:
        from powertrip.aggregator.main import ApiServerSettings, serve_api

        serve_api(
            ApiServerSettings(
                profiler=profiler,
                data_dir=data_dir,
                host=host,
                port=port,
                token=token,
                auth_reads=auth_reads,
                max_concurrent_jobs=max_concurrent_jobs,
                checkpoint_every=checkpoint_every,
                datasets_dir=datasets_dir,
                sites_file=sites,
                log_level=log_level,
            )
        )
        return
    from powertrip.aggregator.main import AggregatorSettings, run_aggregator

    spec = load_job_file(job)
    stop = stop_on_signals()
    reached = run_aggregator(
        AggregatorSettings(profiler, spec, sites, host, metrics_port, linger_s), stop
    )
    raise typer.Exit(0 if reached else 1)


def load_job_file(path: Path) -> JobFile:
    """A job file (YAML), every problem in it named."""
    from pydantic import ValidationError

    from powertrip.aggregator.job import JobFile

    try:
        document = parse_yaml(path.read_text(encoding="utf-8"), str(path), PowerTripError)
        return JobFile.model_validate(document or {})
    except OSError as error:
        raise PowerTripError(f"{path}: cannot read the job file: {error.strerror}") from None
    except ValidationError as error:
        raise PowerTripError(f"{path}: invalid job: {validation_problems(error)}") from None


def validation_problems(error: ValidationError) -> str:
    """Every problem of a pydantic error on one line: `field: message; ...`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
