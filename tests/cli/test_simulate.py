"""`powertrip simulate` and `powertrip report`, run as a user runs them."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

TINY = """
name: tiny-cli
sites: {count: 6}
task: {name: digits, model: mlp, partition: iid}
timing: {base_compute_time_s: 10}
policies:
  - {name: powertrip, initial_sites: 2}
  - {name: centralized, power_cap_ratio: 0.25, label: centralized-25%}
static_optimal: {k_min: 2, k_step: 2}
seeds: 2
target_accuracy: 0.6
max_rounds: 15
"""


def powertrip(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the command line with a timeout."""
    return subprocess.run(
        [sys.executable, "-m", "powertrip", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_simulate_writes_results_report_and_plots(tmp_path: Path) -> None:
    """A run writes results.json, report.md with the TTA table, and the four plots;
    running it again resumes without redoing anything."""
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text(TINY)
    out = tmp_path / "out"
    result = powertrip("simulate", str(experiment), "--out", str(out))
    assert result.returncode == 0, result.stderr
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert len(runs) == 2 * (2 + 3)
    report = (out / "report.md").read_text()
    assert "| policy | median TTA (h)" in report
    assert "static-optimal (k=" in report
    assert "vs centralized-25%" in report
    for plot in ("tta_per_policy", "tta_vs_k", "sites_over_time", "accuracy_vs_time"):
        assert (out / f"{plot}.png").read_bytes()[:4] == b"\x89PNG"
    again = powertrip("simulate", str(experiment), "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr
    assert "10 runs already finished" in again.stderr
    assert len(json.loads((out / "results.json").read_text())["runs"]) == 10
    (out / "report.md").unlink()
    assert powertrip("report", str(out)).returncode == 0
    assert (out / "report.md").exists()


def test_interrupt_keeps_finished_runs(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) mid-experiment exits 130 and leaves valid results of finished runs."""
    experiment = tmp_path / "long.yaml"
    experiment.write_text(TINY.replace("seeds: 2", "seeds: 50"))
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "powertrip", "simulate", str(experiment), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = out / "results.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        results.exists() and len(json.loads(results.read_text())["runs"]) >= 2
    ):
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    kept = json.loads(results.read_text())["runs"]
    assert 2 <= len(kept) < 250
    assert all(run["round_log"] for run in kept)
    assert (out / "report.md").exists()


def test_invalid_experiment_names_file_and_field(tmp_path: Path) -> None:
    """A bad experiment file exits 2 naming the file and each bad field."""
    experiment = tmp_path / "bad.yaml"
    experiment.write_text(TINY.replace("k_step: 2", "k_step: 0").replace("digits", "cifar"))
    result = powertrip("simulate", str(experiment), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert str(experiment) in result.stderr
    assert "unknown task 'cifar'" in result.stderr
    assert "static_optimal.k_step" in result.stderr
    assert not (tmp_path / "out").exists()


def test_preset_and_file_are_exclusive() -> None:
    """Exactly one of a file or --preset; unknown presets list the valid ones."""
    assert powertrip("simulate").returncode == 2
    unknown = powertrip("simulate", "--preset", "nope")
    assert unknown.returncode == 2
    assert "paper-uniform" in unknown.stderr
