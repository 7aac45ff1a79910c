"""/v1/sites: the profiler's latest profile of every site."""

from __future__ import annotations

from collections.abc import Callable

import grpc
from fastapi import APIRouter, HTTPException

from powertrip.aggregator.api.deps import V1_RESPONSES, KnownQuery, Reader, Services
from powertrip.aggregator.api.schemas import ErrorBody, SiteView
from powertrip.profiler.client import ProfilerClient

router = APIRouter(
    prefix="/v1/sites",
    tags=["sites"],
    dependencies=[KnownQuery],
    responses=V1_RESPONSES,
)


@router.get(
    "",
    dependencies=[Reader],
    responses={503: {"model": ErrorBody, "description": "The profiler did not answer."}},
)
def list_sites(services: Services) -> list[SiteView]:
    """Every site's latest power, link and health, as the profiler measured them."""
    try:
        return services.list_sites()
    except grpc.RpcError as error:
        raise HTTPException(503, f"the profiler did not answer: {error.code().name}") from None


def profiler_sites(client: ProfilerClient) -> Callable[[], list[SiteView]]:
    """Sites from the profiler's ListProfiles, converted to the API's view."""

    def read() -> list[SiteView]:
        return [
            SiteView.model_validate({name: getattr(p, name) for name in SiteView.model_fields})
            for p in client.list_profiles()
        ]

    return read
