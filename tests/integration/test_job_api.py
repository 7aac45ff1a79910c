"""The job API as a real aggregator process over real site processes on loopback: a job's
life over REST, cancel mid-round, and resume after the aggregator is SIGKILLed."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import scripted_jobs
from powertrip.aggregator.client import ApiClient, ApiError
from powertrip.aggregator.store import JobPhase, SqliteJobStore, round_to_dict
from powertrip.local import Child, LocalDeployment
from powertrip.transport.payload import decode_params

pytestmark = pytest.mark.integration

TIMEOUT_S = 120.0
FINISHED = ("succeeded", "failed", "cancelled")


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    scripted_jobs.wait_for(condition, what, timeout_s)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[LocalDeployment]:
    with LocalDeployment(3, tmp_path / "run", profile_period_s=0.5) as started:
        yield started


def api(deployment: LocalDeployment, data_dir: Path, *extra: str) -> tuple[Child, ApiClient]:
    child, ready = deployment.aggregator_service(data_dir, *extra)
    token = Path(ready["token_file"]).read_text(encoding="utf-8").strip()
    return child, ApiClient(ready["api_url"], token)


def rounds_of(client: ApiClient, job_id: str) -> list[dict[str, Any]]:
    return list(client.rounds_after(job_id))


def test_a_job_over_rest_from_submit_to_its_model(
    deployment: LocalDeployment, tmp_path: Path
) -> None:
    """Two jobs submitted with one slot: the second waits queued while the first runs; both
    train on the real sites to their target; rounds, sites and the final model are served."""
    _, client = api(deployment, tmp_path / "data")
    spec = {"policy": {"name": "all"}, "target_accuracy": 0.6, "max_rounds": 40, "seed": 1}
    with client:
        sites = {site["site_id"] for site in client.sites()}
        assert sites == {site.site_id for site in deployment.sites}
        first = client.submit(spec)
        second = client.submit({**spec, "seed": 2})
        most_running = 0
        while client.job(second["id"])["state"] not in FINISHED:
            # One read of the store: two reads could see each job running in turn.
            most_running = max(most_running, len(client.jobs("running")["items"]))
            time.sleep(0.05)
        assert most_running == 1
        for job_id in (first["id"], second["id"]):
            job = client.job(job_id)
            assert job["state"] == "succeeded", job["reason"]
            rounds = rounds_of(client, job_id)
            assert [r["round_index"] for r in rounds] == list(range(1, len(rounds) + 1))
            assert job["current_round"] == len(rounds)
            assert rounds[-1]["accuracy"] == job["accuracy"] >= 0.6
            assert set(rounds[-1]["selected_site_ids"]) == sites
        model = client.http.get(f"/v1/jobs/{first['id']}/model")
        assert model.headers["X-Round"] == str(client.job(first["id"])["current_round"])
        assert decode_params(model.content, "the downloaded model")
        with pytest.raises(ApiError, match="already succeeded"):
            client.cancel(first["id"])


def test_cancel_mid_round_keeps_whole_rounds(deployment: LocalDeployment, tmp_path: Path) -> None:
    """Cancelling a running job over REST stops it promptly; its history is rounds 1..n with
    the checkpoint of round n, and nothing more is recorded afterwards."""
    _, client = api(deployment, tmp_path / "data")
    with client:
        job = client.submit(
            {"policy": {"name": "all"}, "target_accuracy": 0.99, "max_rounds": 500,
             "local_steps": 200}
        )  # fmt: skip
        wait_for(lambda: client.job(job["id"])["current_round"] >= 2, "two rounds")
        asked = time.monotonic()
        client.cancel(job["id"])
        wait_for(lambda: client.job(job["id"])["state"] == "cancelled", "the cancel")
        took_s = time.monotonic() - asked
        done = client.job(job["id"])
        rounds = rounds_of(client, job["id"])
        time.sleep(1.0)
        assert rounds_of(client, job["id"]) == rounds
    assert took_s < 5.0, "cancel waited for the round instead of aborting it"
    assert [r["round_index"] for r in rounds] == list(range(1, done["current_round"] + 1))
    assert done["checkpoint_round"] == done["current_round"]
    assert done["reason"] == f"cancelled by a user after round {done['current_round']}"


def test_a_sigkilled_aggregator_resumes_its_job(
    deployment: LocalDeployment, tmp_path: Path
) -> None:
    """SIGKILL the aggregator while its job is mid-round, start a new one on the same data
    folder: the job resumes after its last recorded round, the rounds recorded before the kill
    are unchanged, and every round is there exactly once."""
    data_dir = tmp_path / "data"
    child, client = api(deployment, data_dir)
    spec = {"policy": {"name": "all"}, "target_accuracy": 0.99, "max_rounds": 8,
            "local_steps": 100}  # fmt: skip
    with client:
        job_id = client.submit(spec)["id"]
        wait_for(lambda: client.job(job_id)["current_round"] >= 3, "three rounds")
        child.process.kill()  # SIGKILL: no shutdown, no requeue, mid-round or between rounds
        child.process.wait(timeout=10)
    store = SqliteJobStore(data_dir)  # what the dead aggregator left behind
    before = store.rounds(job_id)
    assert store.get(job_id).phase is JobPhase.RUNNING
    store.close()
    _, client = api(deployment, data_dir)
    with client:
        wait_for(lambda: client.job(job_id)["state"] in FINISHED, "the resumed job", 300)
        job = client.job(job_id)
        rounds = rounds_of(client, job_id)
    assert len(before) >= 3
    for kept, served in zip(before, rounds, strict=False):  # recorded before: untouched
        assert round_to_dict(kept).items() <= served.items()
    assert job["resumes"] == 1
    assert job["state"] == "failed"  # 0.99 is out of reach: the budget ends it
    assert [r["round_index"] for r in rounds] == list(range(1, 9))
    assert job["current_round"] == 8
    assert all(r["end_time_s"] <= s["start_time_s"] + 1e-9 for r, s in itertools.pairwise(rounds))


def powertrip(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "powertrip", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **env},
        check=False,
    )


def test_the_cli_submits_watches_lists_and_cancels(
    deployment: LocalDeployment, tmp_path: Path
) -> None:
    """`powertrip submit --watch`, `jobs`, `cancel` against a real aggregator; a SIGTERMed
    aggregator puts its running job back in the queue instead of failing it."""
    child, client = api(deployment, tmp_path / "data")
    env = {"POWERTRIP_API_URL": client.url, "POWERTRIP_API_TOKEN": client.http.headers[
        "Authorization"].removeprefix("Bearer ")}  # fmt: skip
    job_file = tmp_path / "job.yaml"
    job_file.write_text("policy: {name: all}\ntarget_accuracy: 0.6\nmax_rounds: 40\n")
    watched = powertrip("submit", str(job_file), "--watch", env=env)
    assert watched.returncode == 0, watched.stderr
    assert "round   1" in watched.stdout
    assert "succeeded: reached 0.6" in watched.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: imagenet\nmax_rounds: 0\n")
    refused = powertrip("submit", str(bad), env=env)
    said = " ".join(refused.stderr.split())  # the console wraps long lines
    assert refused.returncode != 0
    assert "task: Value error, unknown task 'imagenet'; valid tasks: mnist" in said
    assert "max_rounds: Input should be greater than or equal to 1" in said
    with client:
        long_job = client.submit({"target_accuracy": 0.99, "max_rounds": 500})
        listed = powertrip("jobs", env=env)
        assert long_job["id"] in listed.stdout
        cancelled = powertrip("cancel", long_job["id"], env=env)
        assert cancelled.returncode == 0, cancelled.stderr
        wait_for(lambda: client.job(long_job["id"])["state"] == "cancelled", "the cancel")
        resumable = client.submit({"target_accuracy": 0.99, "max_rounds": 500})
        wait_for(lambda: client.job(resumable["id"])["current_round"] >= 1, "a round")
        forged = powertrip("cancel", resumable["id"], env={**env, "POWERTRIP_API_TOKEN": "x"})
        assert "403 the API token is not valid" in " ".join(forged.stderr.split())
        assert client.job(resumable["id"])["state"] == "running"
    child.process.terminate()
    assert child.process.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises it
    store = SqliteJobStore(tmp_path / "data")
    job = store.get(resumable["id"])
    store.close()
    assert job.phase is JobPhase.QUEUED
    assert job.reason.startswith("the aggregator stopped after round")
    unreachable = powertrip("cancel", resumable["id"], env=env)
    assert "cannot reach the aggregator" in unreachable.stderr
