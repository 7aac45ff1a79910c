"""The round loop shared by the simulator and the aggregator service (DESIGN §4)."""

from powertrip.rounds.clock import Clock, SimulatedClock
from powertrip.rounds.loop import JobSettings, JobState, RoundFold, RoundLoop, RoundRecord
from powertrip.rounds.protocols import (
    Deliver,
    Evaluator,
    ProfileSource,
    SiteClient,
    SiteReport,
    SiteStatus,
    TrainRequest,
)

__all__ = [
    "Clock",
    "Deliver",
    "Evaluator",
    "JobSettings",
    "JobState",
    "ProfileSource",
    "RoundFold",
    "RoundLoop",
    "RoundRecord",
    "SimulatedClock",
    "SiteClient",
    "SiteReport",
    "SiteStatus",
    "TrainRequest",
]
