"""`powertrip deploy images`: build every image on a host with no image registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powertrip.cli.console import make_console

app = typer.Typer(help="Build PowerTrip's Docker images (needs powertrip[deploy]).")


@app.callback()
def deploy() -> None:
    """Deployment tooling: images from Debian packages, offline builds."""


@app.command()
def images(
    tag: Annotated[str, typer.Option(help="Tag of the three service images.")] = "latest",
    base: Annotated[
        str | None,
        typer.Option(help="Build FROM this image instead of a base made of Debian packages."),
    ] = None,
    repo: Annotated[Path, typer.Option(help="The PowerTrip source tree.")] = Path("."),
    torch_spec: Annotated[str, typer.Option(help="torch requirement for the wheelhouse.")] = (
        "torch==2.13.0"
    ),
    prometheus: Annotated[
        bool, typer.Option(help="Also build powertrip-prometheus from Debian's package.")
    ] = True,
) -> None:
    """Build powertrip-{aggregator,profiler,site}:TAG offline: a Debian base (mmdebstrap, this
    host's mirror), a wheelhouse, and the Dockerfiles with --no-index."""
    from powertrip.deploy.images import (
        SERVICES,
        build_service_image,
        build_wheelhouse,
        debian_image,
        docker_client,
        prometheus_image,
    )

    console = make_console()
    client = docker_client()
    if base is None:
        base = "powertrip-base:latest"
        console.print(f"base {base}: {debian_image(client, base)[:19]}")
    if prometheus:
        image = prometheus_image(client, "powertrip-prometheus:latest")
        console.print(f"powertrip-prometheus:latest: {image[:19]}")
    console.print(f"wheelhouse: {build_wheelhouse(repo, torch_spec)}")
    for service in SERVICES:
        name = f"powertrip-{service}:{tag}"
        console.print(f"{name}: {build_service_image(client, repo, service, name, base)[:19]}")
