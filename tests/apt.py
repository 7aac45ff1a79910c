"""Debian packages a test needs, installed with apt-get when missing (CI runs as root)."""

from __future__ import annotations

import os
import subprocess

import pytest

APT_ENV = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}


def apt_install(*packages: str) -> None:
    """Install `packages` (skips the test when not root, since installing needs it)."""
    if os.geteuid() != 0:
        pytest.skip(f"{', '.join(packages)} not installed, and installing needs root")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=APT_ENV, timeout=300)
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    subprocess.run(command, check=True, env=APT_ENV, timeout=900, capture_output=True)
