"""The round loop shared by the simulator and the aggregator service (DESIGN §4)."""

from powertrip.rounds.clock import Clock, SimulatedClock
from powertrip.rounds.loop import JobSettings, JobState, RoundLoop, RoundRecord
from powertrip.rounds.protocols import (
    Evaluator,
    ProfileSource,
    SiteClient,
    SiteReport,
    SiteStatus,
    TrainRequest,
)

__all__ = [
    "Clock",
    "Evaluator",
    "JobSettings",
    "JobState",
    "ProfileSource",
    "RoundLoop",
    "RoundRecord",
    "SimulatedClock",
    "SiteClient",
    "SiteReport",
    "SiteStatus",
    "TrainRequest",
]
