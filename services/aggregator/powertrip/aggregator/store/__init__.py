"""Where the aggregator keeps jobs, rounds and checkpoints (`JobStore`)."""

from powertrip.aggregator.store.base import (
    JobConflictError,
    JobNotFoundError,
    JobPhase,
    JobRecord,
    JobStore,
    StoreError,
    round_from_dict,
    round_to_dict,
)
from powertrip.aggregator.store.memory import MemoryJobStore
from powertrip.aggregator.store.sqlite import SqliteJobStore

__all__ = [
    "JobConflictError",
    "JobNotFoundError",
    "JobPhase",
    "JobRecord",
    "JobStore",
    "MemoryJobStore",
    "SqliteJobStore",
    "StoreError",
    "round_from_dict",
    "round_to_dict",
]
