"""What the routes depend on: the services, the settings, and the bearer-token checks."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from powertrip.aggregator.api.schemas import ErrorBody, SiteView
from powertrip.aggregator.runner import JobRunner
from powertrip.aggregator.store import JobStore

DEFAULT_MAX_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class ApiSettings:
    """How the API guards itself. `token` is required on every mutating call, and on reads too
    when `auth_reads`; it is compared in constant time and never logged or echoed."""

    token: str
    auth_reads: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("the API token must not be empty")

    def __repr__(self) -> str:  # keeps the token out of logs and tracebacks
        return f"ApiSettings(token=<hidden>, auth_reads={self.auth_reads})"


@dataclass(frozen=True)
class ApiServices:
    """The job store, the runner that runs its jobs, and the profiler's sites."""

    store: JobStore
    runner: JobRunner
    list_sites: Callable[[], list[SiteView]]


def services(request: Request) -> ApiServices:
    """The app's services."""
    found: ApiServices = request.app.state.services
    return found


Services = Annotated[ApiServices, Depends(services)]

_bearer = HTTPBearer(auto_error=False, description="The aggregator's API token.")


def _check(request: Request, credentials: HTTPAuthorizationCredentials | None) -> None:
    settings: ApiSettings = request.app.state.settings
    if credentials is None:
        raise HTTPException(
            401,
            "this endpoint needs the API token: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(credentials.credentials.encode(), settings.token.encode()):
        raise HTTPException(403, "the API token is not valid")


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Mutating endpoints: the token, always."""
    _check(request, credentials)


def require_read_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Read endpoints: the token when the settings say reads need it."""
    settings: ApiSettings = request.app.state.settings
    if settings.auth_reads:
        _check(request, credentials)


Writer = Depends(require_token)
Reader = Depends(require_read_token)


def known_query(request: Request) -> None:
    """Refuse query parameters the route does not take (a typo like ?stat=queued would
    otherwise silently return every job)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    declared = _query_names(dependant) if isinstance(dependant, Dependant) else set()
    unknown = sorted(set(request.query_params) - declared)
    if unknown:
        valid = ", ".join(sorted(declared)) or "none"
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"unknown query parameter; this route takes: {valid}",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )


KnownQuery = Depends(known_query)

V1_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No API token."},
    403: {"model": ErrorBody, "description": "Wrong API token."},
    422: {"model": ErrorBody, "description": "A bad body or query: every problem listed."},
}
"""What every /v1 route may answer besides its own statuses."""


def _query_names(dependant: Dependant) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
