"""The `powertrip` command line, run as a user runs it (a subprocess)."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = """
defaults: {gpus: 8, gpu_power_w: 700}
sites:
  - {site_id: near-weak, distance_km: 100, power_available_ratio: 0.15}
  - {site_id: far-strong, distance_km: 9000, power_available_ratio: 1.0}
  - {site_id: mid-balanced, distance_km: 1500, power_available_ratio: 0.8}
"""


def powertrip(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m powertrip ARGS`, with a timeout."""
    return subprocess.run(
        [sys.executable, "-m", "powertrip", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_rank_shows_scores_and_picks(tmp_path: Path) -> None:
    """`rank` lists every site with its Eq.8 parts and marks the policy's picks in order."""
    sites = tmp_path / "sites.yaml"
    sites.write_text(EXAMPLE)
    result = powertrip("rank", "--sites", str(sites), "--policy", "static-k", "--set", "k=2")
    assert result.returncode == 0, result.stderr
    assert "2 of 3 sites selected" in result.stdout
    assert "alpha=0.500" in result.stdout
    rows = [line for line in result.stdout.splitlines() if "#1" in line or "#2" in line]
    assert "mid-balanced" in rows[0]
    assert len(rows) == 2


def test_rank_update_size_changes_the_weights(tmp_path: Path) -> None:
    """A 2 GB update weighs cost more than power (beta = 2 / 3.5)."""
    sites = tmp_path / "sites.yaml"
    sites.write_text(EXAMPLE)
    result = powertrip("rank", "--sites", str(sites), "--update-size", "2GB")
    assert result.returncode == 0, result.stderr
    assert "beta=0.571" in result.stdout


def test_unknown_policy_lists_valid_names(tmp_path: Path) -> None:
    """A bad policy is one clear error line with the valid names, exit status 2."""
    sites = tmp_path / "sites.yaml"
    sites.write_text(EXAMPLE)
    result = powertrip("rank", "--sites", str(sites), "--policy", "fastest")
    assert result.returncode == 2
    assert "unknown policy 'fastest'" in result.stderr
    assert "powertrip, all, static-k" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_site_file_names_the_site(tmp_path: Path) -> None:
    """An invalid site is reported with file, site and field, not a traceback."""
    sites = tmp_path / "sites.yaml"
    sites.write_text(EXAMPLE.replace("0.15", "1.5"))
    result = powertrip("rank", "--sites", str(sites))
    assert result.returncode == 2
    assert "site 'near-weak' (#0): power_available_ratio must be in (0, 1]" in result.stderr


def test_malformed_setting_is_rejected(tmp_path: Path) -> None:
    """`--set` needs KEY=VALUE."""
    sites = tmp_path / "sites.yaml"
    sites.write_text(EXAMPLE)
    result = powertrip("rank", "--sites", str(sites), "--set", "k70")
    assert result.returncode == 2
    assert "is not KEY=VALUE" in result.stderr


def test_policies_compares_every_policy() -> None:
    """`policies` ranks the embedded example and shows each policy's first selection."""
    result = powertrip("policies")
    assert result.returncode == 0, result.stderr
    for name in ("powertrip", "static-k", "fixed-radius", "centralized", "random-k", "all"):
        assert name in result.stdout
    assert "12 sites" in result.stdout or "of 12 sites" in result.stdout
