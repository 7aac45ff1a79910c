"""Images for hosts with no image registry: a base made of Debian packages (mmdebstrap, then
imported through the Docker SDK), a wheelhouse so that builds need no network, and the three
service images built FROM that base (services/*/Dockerfile)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from powertrip.deploy.debian import AptSource, host_apt_source
from powertrip.errors import PowerTripError

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

log = logging.getLogger(__name__)
SERVICES = ("aggregator", "profiler", "site")
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "iproute2")
PROMETHEUS_PACKAGES = ("prometheus", "ca-certificates")
WHEELHOUSE = Path("deploy/docker/wheels")
BUILD_TOOLS = ("hatchling>=1.25",)  # builds powertrip itself inside the image, offline


def docker_client(timeout_s: float = 600) -> docker.DockerClient:
    """A client for the local engine, or an error that says none answers. Its timeout covers
    one API call, and an image import or build step can take minutes."""
    import docker

    try:
        client = docker.from_env(timeout=round(timeout_s))
        client.ping()
    except docker.errors.DockerException as error:
        raise PowerTripError(f"no Docker engine answers: {error}") from None
    return client


def debian_image(
    client: docker.DockerClient,
    tag: str,
    packages: Sequence[str] = BASE_PACKAGES,
    source: AptSource | None = None,
    changes: Sequence[str] = ('CMD ["python3"]',),
) -> str:
    """Bootstrap a minimal Debian with `packages` from this host's mirror and import it as
    `tag`; returns the image id."""
    if shutil.which("mmdebstrap") is None:
        raise PowerTripError("mmdebstrap not found: apt-get install mmdebstrap")
    source = source or host_apt_source()
    repository, _, version = tag.partition(":")
    with tempfile.TemporaryDirectory(prefix="powertrip-rootfs-") as folder:
        tarball = Path(folder) / "rootfs.tar"
        command = [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(packages)}",
            source.suite,
            str(tarball),
            source.line(),
        ]
        log.info("bootstrapping %s from %s", tag, source.line())
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PowerTripError(f"mmdebstrap failed for {tag}: {done.stderr.strip()[-2000:]}")
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=version or "latest", changes=list(changes)
        )
    image: Image = client.images.get(tag)
    return str(image.id)


def prometheus_image(client: docker.DockerClient, tag: str) -> str:
    """Debian's `prometheus` package as `tag` (compose sets its flags); returns the image id."""
    return debian_image(
        client, tag, PROMETHEUS_PACKAGES, changes=('ENTRYPOINT ["/usr/bin/prometheus"]',)
    )


def project_requirements(pyproject: Path) -> list[str]:
    """The runtime dependencies pyproject.toml declares."""
    with pyproject.open("rb") as file:
        dependencies: list[str] = tomllib.load(file)["project"]["dependencies"]
    return dependencies


def build_wheelhouse(repo: Path, torch_spec: str = "torch==2.13.0") -> Path:
    """Download every wheel the images install (torch as `torch_spec`) into the wheelhouse."""
    folder = repo / WHEELHOUSE
    requirements = [torch_spec, *project_requirements(repo / "pyproject.toml"), *BUILD_TOOLS]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(folder)]
    done = subprocess.run([*command, *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PowerTripError(f"pip download failed: {done.stderr.strip()[-2000:]}")
    return folder


def build_service_image(
    client: docker.DockerClient,
    repo: Path,
    service: str,
    tag: str,
    base_image: str,
    pip_args: str = "--no-index",
) -> str:
    """Build services/SERVICE/Dockerfile as `tag`; returns the image id."""
    import docker

    if service not in SERVICES:
        raise PowerTripError(f"no service {service!r}; services: {', '.join(SERVICES)}")
    try:
        image, _ = client.images.build(
            path=str(repo),
            dockerfile=f"services/{service}/Dockerfile",
            tag=tag,
            buildargs={"BASE_IMAGE": base_image, "PIP_ARGS": pip_args},
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as error:
        lines = [str(item.get("stream", item.get("error", ""))) for item in error.build_log]
        tail = "".join(lines)[-3000:]
        raise PowerTripError(f"building {tag} failed: {error.msg}\n{tail}") from None
    return str(image.id)
