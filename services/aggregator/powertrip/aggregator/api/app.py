"""The aggregator's REST API: `create_app(settings, services)`; nothing runs at import time.

Routes: /v1/jobs (jobs.py), /v1/sites (sites.py), /healthz, /metrics, OpenAPI at /docs.
Domain errors become HTTP statuses in one table (`ERROR_STATUS`); a validation error lists
every bad field; a body over `max_body_bytes` is refused with 413 before it is parsed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from powertrip.aggregator.api import jobs, sites
from powertrip.aggregator.api.deps import ApiServices, ApiSettings
from powertrip.aggregator.api.schemas import Health
from powertrip.aggregator.store import JobConflictError, JobNotFoundError, JobPhase, StoreError
from powertrip.errors import PowerTripError

ERROR_STATUS: dict[type[Exception], int] = {
    JobNotFoundError: 404,
    JobConflictError: 409,
    StoreError: 503,
    PowerTripError: 422,
}


def create_app(
    settings: ApiSettings,
    services: ApiServices,
    registry: CollectorRegistry | None = None,
    on_ready: Callable[[], None] | None = None,
) -> FastAPI:
    """The job API over `services`; its lifespan starts and stops the job runner."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        services.runner.start()
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            services.runner.stop()

    app = FastAPI(
        title="PowerTrip aggregator",
        version="1",
        summary="Submit federated training jobs; the aggregator picks the sites every round.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.state.services = services
    app.state.settings = settings
    app.include_router(jobs.router)
    app.include_router(sites.router)

    for error_type, status in ERROR_STATUS.items():
        app.add_exception_handler(error_type, _error_handler(status))
    app.add_exception_handler(RequestValidationError, _validation_failed)

    @app.get("/healthz", tags=["health"])
    def healthz() -> Health:
        """Liveness and readiness: the store answers; how many jobs run and wait."""
        counts = services.store.counts()
        return Health(
            status="ok", running_jobs=counts[JobPhase.RUNNING], queued_jobs=counts[JobPhase.QUEUED]
        )

    metrics = registry or CollectorRegistry()

    @app.get("/metrics", tags=["health"], response_class=Response)
    def prometheus_metrics() -> Response:
        """Prometheus metrics of the aggregator (rounds, accuracy, bytes, jobs by state)."""
        return Response(generate_latest(metrics), media_type=CONTENT_TYPE_LATEST)

    return app


def _error_handler(status: int) -> Callable[[Request, Exception], Response]:
    def handle(_: Request, error: Exception) -> Response:
        return JSONResponse({"detail": str(error)}, status_code=status)

    return handle


def _validation_failed(_: Request, error: Exception) -> Response:
    """422 naming every bad field: where it is and what is wrong (the input is not echoed)."""
    assert isinstance(error, RequestValidationError)
    problems = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type"))}
        for e in error.errors()
    ]
    return JSONResponse({"detail": problems}, status_code=422)


class BodyLimit:
    """ASGI middleware refusing request bodies over `max_bytes` with 413, before any parsing:
    by their Content-Length when given, else by counting what arrives."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
