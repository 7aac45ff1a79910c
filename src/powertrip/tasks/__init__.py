"""Learning tasks for the simulator and the site workers: datasets and their models."""

from powertrip.tasks.datasets import Dataset, DatasetError
from powertrip.tasks.registry import TASK_NAMES, build_model, load_task

__all__ = ["TASK_NAMES", "Dataset", "DatasetError", "build_model", "load_task"]
