"""The durable `JobStore`: SQLite in WAL mode plus safetensors checkpoint files.

Layout of the data folder:
    jobs.sqlite3 (+ -wal, -shm)          jobs and rounds
    checkpoints/<job>/round-NNNNNN.safetensors   the global model after round NNNNNN
    aggregator.lock                      held while an aggregator uses the folder

A round is saved in two steps: its checkpoint is written to a temporary file, synced and
renamed into place; then the round's row and the job's summary are committed in one
transaction. A crash between the two leaves a checkpoint no row points to, which the next
save of that round replaces, so the model a job resumes from always matches its last recorded
round. Commits are synchronous (`synchronous=FULL`): a recorded round survives a power cut.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from powertrip.aggregator.job import JobSpec, Resume
from powertrip.aggregator.store import base
from powertrip.aggregator.store.base import JobNotFoundError, JobPhase, JobRecord, StoreError
from powertrip.errors import PowerTripError
from powertrip.fl.params import Params
from powertrip.rounds import RoundRecord
from powertrip.transport.payload import Payload, decode_params, encode_params

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    phase TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at_s REAL NOT NULL,
    started_at_s REAL,
    finished_at_s REAL,
    rounds_completed INTEGER NOT NULL,
    initial_accuracy REAL,
    accuracy REAL,
    selected_site_ids TEXT NOT NULL,
    elapsed_s REAL NOT NULL,
    time_to_accuracy_s REAL,
    cancel_requested INTEGER NOT NULL,
    resumes INTEGER NOT NULL,
    checkpoint_round INTEGER NOT NULL
);
CREATE INDEX jobs_by_phase ON jobs (phase, seq);
CREATE TABLE rounds (
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    round_index INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (job_id, round_index)
) WITHOUT ROWID;
"""
_COLUMNS = (
    "job_id", "spec", "phase", "reason", "created_at_s", "started_at_s", "finished_at_s",
    "rounds_completed", "initial_accuracy", "accuracy", "selected_site_ids", "elapsed_s",
    "time_to_accuracy_s", "cancel_requested", "resumes", "checkpoint_round",
)  # fmt: skip


def _row(job: JobRecord) -> tuple[Any, ...]:
    return (
        job.job_id, job.spec.model_dump_json(), str(job.phase), job.reason, job.created_at_s,
        job.started_at_s, job.finished_at_s, job.rounds_completed, job.initial_accuracy,
        job.accuracy, json.dumps(list(job.selected_site_ids)), job.elapsed_s,
        job.time_to_accuracy_s, int(job.cancel_requested), job.resumes, job.checkpoint_round,
    )  # fmt: skip


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        job_id=row["job_id"],
        spec=JobSpec.model_validate_json(row["spec"]),
        phase=JobPhase(row["phase"]),
        reason=row["reason"],
        created_at_s=row["created_at_s"],
        started_at_s=row["started_at_s"],
        finished_at_s=row["finished_at_s"],
        rounds_completed=row["rounds_completed"],
        initial_accuracy=row["initial_accuracy"],
        accuracy=row["accuracy"],
        selected_site_ids=tuple(json.loads(row["selected_site_ids"])),
        elapsed_s=row["elapsed_s"],
        time_to_accuracy_s=row["time_to_accuracy_s"],
        cancel_requested=bool(row["cancel_requested"]),
        resumes=row["resumes"],
        checkpoint_round=row["checkpoint_round"],
    )


class SqliteJobStore:
    """Jobs, rounds and checkpoints in `data_dir`; one aggregator at a time may open it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.checkpoint_dir = data_dir / "checkpoints"
        try:
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"{data_dir}: cannot create the data folder: {error}") from None
        self._lock_file = (data_dir / "aggregator.lock").open("a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise StoreError(
                f"{data_dir} is in use by another aggregator (it holds {data_dir}/aggregator.lock)"
            ) from None
        try:
            self._db = sqlite3.connect(
                data_dir / "jobs.sqlite3", isolation_level=None, check_same_thread=False
            )
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as error:
            self._lock_file.close()
            raise StoreError(f"{data_dir}/jobs.sqlite3: {error}") from None
        self._lock = threading.Lock()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self._db.executescript(
                f"BEGIN; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
            )
        elif version != SCHEMA_VERSION:
            raise StoreError(
                f"jobs.sqlite3 has schema version {version}; this aggregator reads {SCHEMA_VERSION}"
            )

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self, db: sqlite3.Connection, job_id: str) -> JobRecord:
        row = db.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job {job_id!r}")
        return _job(row)

    def _write(self, db: sqlite3.Connection, job: JobRecord) -> JobRecord:
        assignments = ", ".join(f"{c} = ?" for c in _COLUMNS[1:])
        db.execute(f"UPDATE jobs SET {assignments} WHERE job_id = ?", (*_row(job)[1:], job.job_id))
        return job

    def create(self, spec: JobSpec, now_s: float) -> JobRecord:
        """A new queued job with a fresh id."""
        job = JobRecord(secrets.token_hex(6), spec, JobPhase.QUEUED, now_s)
        with self._transaction() as db:
            marks = ", ".join("?" * len(_COLUMNS))
            db.execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({marks})", _row(job))
        return job

    def get(self, job_id: str) -> JobRecord:
        """The job; `JobNotFoundError` if there is none."""
        with self._lock:
            return self._read(self._db, job_id)

    def list_jobs(
        self, phase: JobPhase | None = None, before: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """Jobs newest first, optionally of one phase, starting after the job `before`."""
        query, args = "SELECT * FROM jobs WHERE 1", []
        with self._lock:
            if before is not None:
                cursor = self._db.execute("SELECT seq FROM jobs WHERE job_id = ?", (before,))
                row = cursor.fetchone()
                if row is None:
                    raise JobNotFoundError(f"no job {before!r}")
                query, args = query + " AND seq < ?", [row["seq"]]
            if phase is not None:
                query, args = query + " AND phase = ?", [*args, str(phase)]
            rows = self._db.execute(f"{query} ORDER BY seq DESC LIMIT ?", (*args, limit))
            return [_job(row) for row in rows]

    def next_queued(self) -> JobRecord | None:
        """The oldest queued job."""
        jobs = self._phase(JobPhase.QUEUED, 1)
        return jobs[0] if jobs else None

    def in_phase(self, phase: JobPhase) -> list[JobRecord]:
        """Every job in `phase`, oldest first."""
        return self._phase(phase, -1)

    def counts(self) -> dict[JobPhase, int]:
        """How many jobs are in each phase (every phase present)."""
        with self._lock:
            rows = self._db.execute("SELECT phase, COUNT(*) AS n FROM jobs GROUP BY phase")
            return dict.fromkeys(JobPhase, 0) | {JobPhase(r["phase"]): r["n"] for r in rows}

    def _phase(self, phase: JobPhase, limit: int) -> list[JobRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM jobs WHERE phase = ? ORDER BY seq LIMIT ?", (str(phase), limit)
            )
            return [_job(row) for row in rows]

    def mark_running(self, job_id: str, now_s: float) -> JobRecord:
        """A queued job starts (or starts again after a crash)."""
        with self._transaction() as db:
            return self._write(db, base.started(self._read(db, job_id), now_s))

    def set_initial_accuracy(self, job_id: str, accuracy: float) -> None:
        """Accuracy of the job's initial model."""
        with self._transaction() as db:
            self._write(db, replace(self._read(db, job_id), initial_accuracy=accuracy))

    def save_round(self, job_id: str, record: RoundRecord, params: Params | None) -> None:
        """Record the job's next round: checkpoint file first, then one transaction."""
        job = self.get(job_id)
        base.after_round(job, record, params is not None)  # refuse before writing anything
        folder = self.checkpoint_dir / job_id
        if params is not None:
            _write_atomically(folder / _checkpoint_name(record.round_index), encode_params(params))
        with self._transaction() as db:
            job = self._write(
                db, base.after_round(self._read(db, job_id), record, params is not None)
            )
            db.execute(
                "INSERT INTO rounds (job_id, round_index, record) VALUES (?, ?, ?)",
                (job_id, record.round_index, json.dumps(base.round_to_dict(record))),
            )
        if params is not None:  # older checkpoints are no longer needed
            for path in folder.glob("round-*.safetensors"):
                if path.name < _checkpoint_name(job.checkpoint_round):
                    path.unlink(missing_ok=True)

    def request_cancel(self, job_id: str, now_s: float) -> JobRecord:
        """Cancel a queued job now, or flag a running one for its runner to stop."""
        with self._transaction() as db:
            return self._write(db, base.cancelled(self._read(db, job_id), now_s))

    def finish(self, job_id: str, phase: JobPhase, reason: str, now_s: float) -> JobRecord:
        """End a job for good."""
        with self._transaction() as db:
            return self._write(db, base.finished(self._read(db, job_id), phase, reason, now_s))

    def requeue(self, job_id: str, reason: str) -> JobRecord:
        """Put a running job back in the queue; it will resume."""
        with self._transaction() as db:
            return self._write(db, base.requeued(self._read(db, job_id), reason))

    def rounds(self, job_id: str, after: int = 0, limit: int = 100) -> list[RoundRecord]:
        """The job's rounds with index > `after`, in order, at most `limit`."""
        with self._lock:
            self._read(self._db, job_id)
            rows = self._db.execute(
                "SELECT record FROM rounds WHERE job_id = ? AND round_index > ? "
                "ORDER BY round_index LIMIT ?",
                (job_id, after, limit),
            )
            return [base.round_from_dict(json.loads(row["record"])) for row in rows]

    def resume_point(self, job_id: str) -> Resume | None:
        """The last checkpoint and the rounds up to it; later rounds are dropped."""
        with self._transaction() as db:
            job = self._read(db, job_id)
            db.execute(
                "DELETE FROM rounds WHERE job_id = ? AND round_index > ?",
                (job_id, job.checkpoint_round),
            )
            rows = db.execute(
                "SELECT record FROM rounds WHERE job_id = ? ORDER BY round_index", (job_id,)
            )
            kept = [base.round_from_dict(json.loads(row["record"])) for row in rows]
            job = self._write(db, base.summarized(job, kept))
        if job.checkpoint_round == 0:
            return None
        assert job.initial_accuracy is not None
        params = self._load(job_id, job.checkpoint_round)
        return Resume(params, job.initial_accuracy, tuple(kept))

    def _load(self, job_id: str, round_index: int) -> Params:
        path = self.checkpoint_dir / job_id / _checkpoint_name(round_index)
        try:
            arrays = decode_params(path.read_bytes(), str(path))
        except (OSError, PowerTripError) as error:
            raise StoreError(f"{path}: cannot read the checkpoint: {error}") from None
        return {name: value.copy() for name, value in arrays.items()}  # type: ignore[misc]

    def checkpoint(self, job_id: str) -> tuple[int, Payload] | None:
        """The latest checkpoint as (round, safetensors payload)."""
        job = self.get(job_id)
        if job.checkpoint_round == 0:
            return None
        path = self.checkpoint_dir / job_id / _checkpoint_name(job.checkpoint_round)
        try:
            return job.checkpoint_round, Payload.of(path.read_bytes())
        except OSError as error:
            raise StoreError(f"{path}: cannot read the checkpoint: {error}") from None

    def close(self) -> None:
        """Close the database and let another aggregator open the folder."""
        with self._lock:
            self._db.close()
        self._lock_file.close()


def _checkpoint_name(round_index: int) -> str:
    return f"round-{round_index:06d}.safetensors"


def _write_atomically(path: Path, payload: Payload) -> None:
    """Write `payload` to `path` so that `path` is either absent, old, or whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    with temporary.open("wb") as file:
        for segment in payload.segments:
            file.write(segment)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
