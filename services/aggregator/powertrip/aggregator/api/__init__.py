"""The aggregator's REST job API (FastAPI)."""

from powertrip.aggregator.api.app import create_app
from powertrip.aggregator.api.deps import ApiServices, ApiSettings
from powertrip.aggregator.api.sites import profiler_sites

__all__ = ["ApiServices", "ApiSettings", "create_app", "profiler_sites"]
