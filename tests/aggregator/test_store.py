"""One contract suite for every `JobStore`, then what only the SQLite store promises."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.store import (
    JobConflictError,
    JobNotFoundError,
    JobPhase,
    JobStore,
    MemoryJobStore,
    SqliteJobStore,
    StoreError,
)
from powertrip.rounds import RoundRecord
from powertrip.transport.payload import decode_params

SPEC = JobSpec(target_accuracy=0.5, max_rounds=10)


def make_round(index: int, accuracy: float) -> RoundRecord:
    return RoundRecord(
        round_index=index,
        start_time_s=index - 1.0,
        end_time_s=index - 0.25,
        candidate_count=4,
        selected_site_ids=("a", f"s{index}"),
        completed_site_ids=("a",),
        dropped=((f"s{index}", "late: missed the deadline"),),
        compute_time_s=0.5,
        communication_time_s=0.25,
        accuracy=accuracy,
        accuracy_gain=0.1,
        mean_power_available_ratio=0.75,
        power_cap_ratio=None if index % 2 else 0.5,
    )


def params(value: float) -> dict[str, np.ndarray]:
    return {"w": np.full((3, 2), value, np.float32), "b": np.arange(2, dtype=np.float32) + value}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    opened: JobStore = MemoryJobStore() if request.param == "memory" else SqliteJobStore(tmp_path)
    yield opened
    opened.close()


def running(store: JobStore) -> str:
    job = store.create(SPEC, now_s=100.0)
    store.mark_running(job.job_id, now_s=101.0)
    store.set_initial_accuracy(job.job_id, 0.1)
    return job.job_id


def test_a_new_job_is_queued_with_its_spec(store: JobStore) -> None:
    """create() stores the spec as given and the job starts queued with no rounds."""
    job = store.create(SPEC, now_s=100.0)
    again = store.get(job.job_id)
    assert again == job
    assert (again.phase, again.spec, again.rounds_completed) == (JobPhase.QUEUED, SPEC, 0)


def test_unknown_job_is_not_found(store: JobStore) -> None:
    """Every lookup of a missing id raises JobNotFoundError naming it."""
    with pytest.raises(JobNotFoundError, match="nope"):
        store.get("nope")
    with pytest.raises(JobNotFoundError):
        store.rounds("nope")
    with pytest.raises(JobNotFoundError):
        store.request_cancel("nope", 1.0)


def test_jobs_list_newest_first_and_pages_stay_stable(store: JobStore) -> None:
    """Paging with `before` gives each job once, even when jobs are created between pages."""
    ids = [store.create(SPEC, now_s=float(i)).job_id for i in range(5)]
    first = store.list_jobs(limit=2)
    assert [j.job_id for j in first] == [ids[4], ids[3]]
    store.create(SPEC, now_s=9.0)  # a new job must not shift the next page
    second = store.list_jobs(before=first[-1].job_id, limit=2)
    third = store.list_jobs(before=second[-1].job_id, limit=2)
    assert [j.job_id for j in second + third] == [ids[2], ids[1], ids[0]]


def test_jobs_list_filters_by_phase(store: JobStore) -> None:
    """list_jobs(phase) returns only jobs in that phase; next_queued is the oldest queued."""
    first, second, third = (store.create(SPEC, now_s=float(i)).job_id for i in range(3))
    store.mark_running(first, 5.0)
    assert [j.job_id for j in store.list_jobs(JobPhase.QUEUED)] == [third, second]
    assert [j.job_id for j in store.in_phase(JobPhase.RUNNING)] == [first]
    queued = store.next_queued()
    assert queued is not None
    assert queued.job_id == second
    assert store.counts() == {
        JobPhase.QUEUED: 2,
        JobPhase.RUNNING: 1,
        JobPhase.SUCCEEDED: 0,
        JobPhase.FAILED: 0,
        JobPhase.CANCELLED: 0,
    }


def test_rounds_are_recorded_in_order_and_summarised(store: JobStore) -> None:
    """Each saved round updates the summary; time to accuracy is the first round at target."""
    job_id = running(store)
    for index, accuracy in enumerate([0.3, 0.55, 0.52], start=1):
        store.save_round(job_id, make_round(index, accuracy), params(index))
    job = store.get(job_id)
    assert job.rounds_completed == 3
    assert job.accuracy == pytest.approx(0.52)
    assert job.time_to_accuracy_s == pytest.approx(1.75)  # round 2 ended 1.75 s in
    assert job.selected_site_ids == ("a", "s3")
    assert job.checkpoint_round == 3
    assert store.rounds(job_id) == [make_round(i, a) for i, a in [(1, 0.3), (2, 0.55), (3, 0.52)]]


@pytest.mark.parametrize("index", [1, 2, 4])
def test_a_round_out_of_order_is_refused_and_changes_nothing(store: JobStore, index: int) -> None:
    """A repeated round or a gap is refused; the stored rounds and checkpoint stay as they were."""
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.2), params(1))
    store.save_round(job_id, make_round(2, 0.3), params(2))
    before = (store.get(job_id), store.rounds(job_id), store.checkpoint(job_id))
    with pytest.raises(JobConflictError, match="does not follow"):
        store.save_round(job_id, make_round(index, 0.9), params(9))
    after = (store.get(job_id), store.rounds(job_id), store.checkpoint(job_id))
    assert before[:2] == after[:2]
    assert before[2] is not None
    assert after[2] is not None
    assert after[2][0] == before[2][0]
    assert after[2][1].tobytes() == before[2][1].tobytes()


def test_only_a_running_job_records_rounds(store: JobStore) -> None:
    """A queued or finished job refuses rounds."""
    job = store.create(SPEC, 1.0)
    with pytest.raises(JobConflictError, match="queued"):
        store.save_round(job.job_id, make_round(1, 0.2), None)
    store.mark_running(job.job_id, 2.0)
    store.finish(job.job_id, JobPhase.FAILED, "broken", 3.0)
    with pytest.raises(JobConflictError, match="failed"):
        store.save_round(job.job_id, make_round(1, 0.2), None)


def test_rounds_page_by_index(store: JobStore) -> None:
    """rounds(after, limit) pages through the history without overlap."""
    job_id = running(store)
    for index in range(1, 8):
        store.save_round(job_id, make_round(index, 0.1 * index), None)
    pages = [store.rounds(job_id, after=a, limit=3) for a in (0, 3, 6)]
    assert [[r.round_index for r in page] for page in pages] == [[1, 2, 3], [4, 5, 6], [7]]


def test_cancel_queued_is_immediate_running_is_flagged_finished_refused(store: JobStore) -> None:
    """Cancelling a queued job ends it; a running one is only flagged; a finished one conflicts."""
    queued = store.create(SPEC, 1.0).job_id
    assert store.request_cancel(queued, 2.0).phase is JobPhase.CANCELLED
    job_id = running(store)
    flagged = store.request_cancel(job_id, 3.0)
    assert (flagged.phase, flagged.cancel_requested) == (JobPhase.RUNNING, True)
    store.finish(job_id, JobPhase.CANCELLED, "cancelled by the user", 4.0)
    with pytest.raises(JobConflictError, match="already cancelled"):
        store.request_cancel(job_id, 5.0)
    with pytest.raises(JobConflictError, match="already cancelled"):
        store.finish(job_id, JobPhase.SUCCEEDED, "", 5.0)


def test_requeue_then_resume_from_the_last_checkpoint(store: JobStore) -> None:
    """A requeued job resumes with its last checkpoint's model and the rounds up to it."""
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.2), params(1))
    store.save_round(job_id, make_round(2, 0.3), params(2))
    job = store.requeue(job_id, "aggregator stopped")
    assert (job.phase, job.resumes) == (JobPhase.QUEUED, 1)
    store.mark_running(job_id, 9.0)
    resume = store.resume_point(job_id)
    assert resume is not None
    assert resume.initial_accuracy == pytest.approx(0.1)
    assert resume.records == (make_round(1, 0.2), make_round(2, 0.3))
    for name, value in params(2).items():
        np.testing.assert_array_equal(resume.global_params[name], value)
    resume.global_params["w"][0, 0] = 99.0  # the resumed model is the caller's to change
    store.save_round(job_id, make_round(3, 0.4), resume.global_params)


def test_rounds_after_the_last_checkpoint_are_dropped_on_resume(store: JobStore) -> None:
    """Rounds saved without a checkpoint are run again: resume drops them and the summary."""
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.6), params(1))
    store.save_round(job_id, make_round(2, 0.7), None)
    resume = store.resume_point(job_id)
    assert resume is not None
    assert [r.round_index for r in resume.records] == [1]
    job = store.get(job_id)
    assert (job.rounds_completed, job.accuracy, job.elapsed_s) == (1, 0.6, 0.75)
    assert [r.round_index for r in store.rounds(job_id)] == [1]


def test_no_checkpoint_means_a_fresh_start(store: JobStore) -> None:
    """Without any checkpoint resume_point is None and no round is kept."""
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.6), None)
    assert store.resume_point(job_id) is None
    assert store.rounds(job_id) == []
    assert store.checkpoint(job_id) is None


def test_checkpoint_is_the_model_as_safetensors(store: JobStore) -> None:
    """checkpoint() returns the newest round and its model, decodable as safetensors."""
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.2), params(1))
    store.save_round(job_id, make_round(2, 0.3), params(2))
    saved = store.checkpoint(job_id)
    assert saved is not None
    round_index, payload = saved
    decoded = decode_params(payload.tobytes(), "test")
    assert round_index == 2
    np.testing.assert_array_equal(decoded["b"], params(2)["b"])


# What only the SQLite store promises.


def test_sqlite_keeps_everything_across_reopen(tmp_path: Path) -> None:
    """Jobs, rounds and checkpoints written before close() are all there after reopening."""
    first = SqliteJobStore(tmp_path)
    job_id = running(first)
    first.save_round(job_id, make_round(1, 0.2), params(1))
    job = first.get(job_id)
    first.close()
    second = SqliteJobStore(tmp_path)
    try:
        assert second.get(job_id) == job
        assert second.rounds(job_id) == [make_round(1, 0.2)]
        resume = second.resume_point(job_id)
        assert resume is not None
        np.testing.assert_array_equal(resume.global_params["w"], params(1)["w"])
    finally:
        second.close()


def test_sqlite_folder_is_held_by_one_aggregator(tmp_path: Path) -> None:
    """A second store on the same folder is refused while the first is open."""
    first = SqliteJobStore(tmp_path)
    with pytest.raises(StoreError, match="in use by another aggregator"):
        SqliteJobStore(tmp_path)
    first.close()
    SqliteJobStore(tmp_path).close()


def test_sqlite_uses_wal_and_keeps_only_the_newest_checkpoint(tmp_path: Path) -> None:
    """The database is in WAL mode; older checkpoint files are removed after a newer lands."""
    store = SqliteJobStore(tmp_path)
    job_id = running(store)
    for index in (1, 2, 3):
        store.save_round(job_id, make_round(index, 0.1), params(index))
    store.close()
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    files = sorted(p.name for p in (tmp_path / "checkpoints" / job_id).iterdir())
    assert files == ["round-000003.safetensors"]


def test_sqlite_orphan_checkpoint_does_not_leak_into_resume(tmp_path: Path) -> None:
    """A checkpoint written for a round whose row never committed is not what a job resumes."""
    store = SqliteJobStore(tmp_path)
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.2), params(1))
    # As if the aggregator died between writing round 2's checkpoint and committing its row:
    (tmp_path / "checkpoints" / job_id / "round-000002.safetensors").write_bytes(b"torn")
    resume = store.resume_point(job_id)
    assert resume is not None
    np.testing.assert_array_equal(resume.global_params["w"], params(1)["w"])
    store.save_round(job_id, make_round(2, 0.3), params(2))  # replaces the orphan
    saved = store.checkpoint(job_id)
    assert saved is not None
    np.testing.assert_array_equal(decode_params(saved[1].tobytes(), "t")["w"], params(2)["w"])
    store.close()


def test_sqlite_refuses_a_file_that_is_not_its_database(tmp_path: Path) -> None:
    """A data folder whose jobs.sqlite3 is not a database gets a StoreError naming the file."""
    (tmp_path / "jobs.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match=r"jobs\.sqlite3"):
        SqliteJobStore(tmp_path)
    (tmp_path / "jobs.sqlite3").unlink()
    SqliteJobStore(tmp_path).close()


def test_sqlite_unreadable_checkpoint_is_a_store_error(tmp_path: Path) -> None:
    """A corrupted checkpoint file gives a StoreError naming it, not a crash."""
    store = SqliteJobStore(tmp_path)
    job_id = running(store)
    store.save_round(job_id, make_round(1, 0.2), params(1))
    (tmp_path / "checkpoints" / job_id / "round-000001.safetensors").write_bytes(b"xx")
    with pytest.raises(StoreError, match="round-000001"):
        store.resume_point(job_id)
    store.close()
