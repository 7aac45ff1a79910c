"""A site shapes its own link (kernel where it can, userspace proxy for the rest), and
`powertrip link check` measures it as the profiler does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from netns import namespace_pair
from powertrip.netem import LinkShaper, RootQdisc

POWERTRIP = str(Path(sys.executable).parent / "powertrip")
SITE = [POWERTRIP, "site", "--id", "s1", "--task", "digits", "--model", "mlp"]


@contextmanager
def running_site(command: Sequence[str]) -> Iterator[dict[str, object]]:
    """Start a site, yield its ready line, then stop it with SIGTERM."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline() or "{}")
        assert ready.get("event") == "ready", f"site exited with {process.wait()}"
        yield ready
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def check(prefix: Sequence[str], address: str, *expect: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, POWERTRIP, "link", "check", address, "--probe-size", "2MiB", *expect],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.integration
def test_userspace_link_delays_and_paces_and_the_check_says_so() -> None:
    link = ["--link-delay-ms", "15", "--link-rate-mbit", "40"]
    with running_site([*SITE, "--port", "0", *link]) as ready:
        address = f"127.0.0.1:{ready['port']}"
        good = check((), address, "--delay-ms", "15", "--rate-mbit", "40")
        assert good.returncode == 0, good.stdout + good.stderr
        assert "rtt_ms=" in good.stdout
        wrong = check((), address, "--delay-ms", "15", "--rate-mbit", "80")
        assert wrong.returncode == 1, wrong.stdout + wrong.stderr
        assert "rtt_ms=" in wrong.stdout  # measured, and judged off
        slow = check((), address, "--delay-ms", "40", "--rate-mbit", "40")
        assert slow.returncode == 1, slow.stdout + slow.stderr
        assert "rtt_ms=" in slow.stdout


@pytest.mark.integration
def test_site_shapes_its_device_and_clears_it_when_it_stops() -> None:
    with namespace_pair() as pair:
        inside = pair.exec_prefix(pair.left)
        shaper = LinkShaper(pair.left_device, pair.tc())
        before = shaper.root()
        link = ["--link-device", pair.left_device, "--link-delay-ms", "10"]
        link += ["--link-rate-mbit", "20"]
        with running_site([*inside, *SITE, "--host", "0.0.0.0", "--port", "50051", *link]):
            assert shaper.root().is_ours
            measured = check(
                pair.exec_prefix(pair.right),
                f"{pair.left_address}:50051",
                *("--delay-ms", "10", "--rate-mbit", "20"),
            )
            assert measured.returncode == 0, measured.stdout + measured.stderr
        assert shaper.root() == before


def test_impossible_profile_is_refused_before_anything_starts() -> None:
    done = subprocess.run(
        [*SITE, "--link-device", "lo", "--link-rate-mbit", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "link rate must be >= 0.008 Mbit/s, got 0 Mbit/s" in done.stderr
    assert RootQdisc("noqueue", "0:") == LinkShaper("lo").root()
