"""Federated averaging and update checks, on plain numpy arrays (no torch, no I/O)."""

from powertrip.fl.fedavg import StreamingFedAvg, fedavg
from powertrip.fl.params import InvalidUpdateError, Params, check_update

__all__ = ["InvalidUpdateError", "Params", "StreamingFedAvg", "check_update", "fedavg"]
