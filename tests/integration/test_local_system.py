"""The whole system as separate processes on loopback: profiler, sites behind emulated links,
and an aggregator running a job, as `powertrip up` / `powertrip demo` start them."""

import json
from pathlib import Path
from typing import Any

import pytest

from powertrip.local import LocalDeployment

pytestmark = pytest.mark.integration


def write_job(path: Path, **fields: Any) -> Path:
    """A job file (JSON is YAML)."""
    path.write_text(json.dumps({"job_id": "it", **fields}))
    return path


def test_a_killed_site_is_dropped_and_readmitted_after_restart(tmp_path: Path) -> None:
    """Three site processes; one is SIGKILLed mid-job: the round it was in completes with the
    other two, the site is left out while dead, takes part again after it restarts, and the
    job still reaches its target."""
    job = write_job(
        tmp_path / "job.json",
        policy={"name": "all"},
        target_accuracy=0.85,
        max_rounds=600,
        local_steps=5,
        learning_rate=0.01,
        round_deadline_s=30,
    )
    with LocalDeployment(3, tmp_path / "run", profile_period_s=0.5) as deployment:
        aggregator = deployment.aggregator(job)
        victim = deployment.sites[1].site_id
        others = {s.site_id for s in deployment.sites} - {victim}
        phase = "running"
        dropped_round: dict[str, Any] = {}
        rounds_while_dead = 0
        done: dict[str, Any] = {}
        while not done:
            event = aggregator.next_event(timeout_s=120)
            assert event["event"] != "exit", f"aggregator exited: {event}"
            if event["event"] == "done":
                done = event
            elif phase == "running" and event["round"] == 2:
                deployment.kill(victim)  # the aggregator is already in round 3
                phase = "killed"
            elif phase == "killed" and victim in [d[0] for d in event["dropped"]]:
                dropped_round = event
                deployment.start_site(1)
                phase = "restarting"
            elif phase == "restarting":
                if victim in event["completed"]:
                    phase = "readmitted"
                else:
                    rounds_while_dead += 1
                    assert victim not in event["selected"] or victim in dict(event["dropped"])
    assert phase == "readmitted", f"the site never took part again (phase {phase})"
    assert set(dropped_round["completed"]) == others
    assert dropped_round["accuracy"] > 0
    assert rounds_while_dead > 0
    assert done["reached"], done
    assert done["accuracy"] >= 0.85
