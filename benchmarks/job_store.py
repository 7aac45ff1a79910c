"""What making a round durable costs: `SqliteJobStore.save_round` with a 64 MiB checkpoint.

Measured: per round, the store writes the model's checkpoint to a temporary file, fsyncs it,
renames it into place, fsyncs the folder, then commits the round's row and the job's summary
in one synchronous SQLite transaction, and removes the older checkpoint.

Reference, same run: the bare minimum any durable checkpoint needs, the same bytes written to
one file with one fsync. Last line: `store_round_over_raw_write=<median ratio>` (goal <= 1.5:
the bookkeeping around the bytes stays small).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.store import SqliteJobStore
from powertrip.rounds import RoundRecord
from powertrip.transport.payload import encode_params

MODEL_BYTES = 64 * 2**20
ROUNDS = 12


def round_record(index: int) -> RoundRecord:
    return RoundRecord(
        round_index=index, start_time_s=index - 1.0, end_time_s=float(index),
        candidate_count=100, selected_site_ids=tuple(f"site-{i}" for i in range(20)),
        completed_site_ids=tuple(f"site-{i}" for i in range(19)),
        dropped=(("site-19", "late: missed the deadline"),), compute_time_s=0.5,
        communication_time_s=0.5, accuracy=0.5, accuracy_gain=0.01,
        mean_power_available_ratio=0.7,
    )  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    params = {
        f"layer{i}": rng.standard_normal(MODEL_BYTES // 4 // 8, dtype=np.float32) for i in range(8)
    }
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        store = SqliteJobStore(Path(folder) / "data")
        job = store.create(JobSpec(max_rounds=ROUNDS), time.time())
        store.mark_running(job.job_id, time.time())
        store.set_initial_accuracy(job.job_id, 0.1)
        raw_path = Path(folder) / "raw.safetensors"
        stored, raw = [], []
        for index in range(1, ROUNDS + 1):
            start = time.perf_counter()
            store.save_round(job.job_id, round_record(index), params)
            stored.append(time.perf_counter() - start)
            start = time.perf_counter()
            with raw_path.open("wb") as file:
                for segment in encode_params(params).segments:
                    file.write(segment)
                file.flush()
                os.fsync(file.fileno())
            raw.append(time.perf_counter() - start)
        store.close()
    store_s, raw_s = statistics.median(stored), statistics.median(raw)
    print(f"model {MODEL_BYTES / 2**20:.0f} MiB, {ROUNDS} rounds (medians)")
    print(f"save_round (checkpoint + transaction): {store_s * 1e3:.1f} ms")
    print(f"raw write + fsync of the same bytes:   {raw_s * 1e3:.1f} ms")
    print(f"store_round_over_raw_write={store_s / raw_s:.2f}")


if __name__ == "__main__":
    main()
