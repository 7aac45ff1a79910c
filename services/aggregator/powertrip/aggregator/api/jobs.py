"""/v1/jobs: submit, list, inspect, page through rounds, cancel, download the model."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.responses import StreamingResponse

from powertrip.aggregator.api.deps import V1_RESPONSES, KnownQuery, Reader, Services, Writer
from powertrip.aggregator.api.schemas import ErrorBody, JobPage, JobView, RoundPage, RoundView
from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.store import JobNotFoundError, JobPhase

router = APIRouter(
    prefix="/v1/jobs",
    tags=["jobs"],
    dependencies=[KnownQuery],
    responses={**V1_RESPONSES, 404: {"model": ErrorBody, "description": "No such job."}},
)

JobId = Annotated[str, Path(min_length=1, max_length=64, description="The job's id.")]


@router.post(
    "",
    status_code=201,
    dependencies=[Writer],
    responses={
        400: {"model": ErrorBody, "description": "The body cannot be decoded."},
        413: {"model": ErrorBody, "description": "Body too large."},
    },
)
def submit_job(
    spec: Annotated[JobSpec, Body(description="The job; every field has a default.")],
    services: Services,
    response: Response,
) -> JobView:
    """Queue a training job; it runs when a slot is free (see max concurrent jobs)."""
    job = services.runner.submit(spec)
    response.headers["Location"] = f"{router.prefix}/{job.job_id}"
    return JobView.of(job)


@router.get("", dependencies=[Reader])
def list_jobs(
    services: Services,
    state: Annotated[JobPhase | None, Query(description="Only jobs in this state.")] = None,
    before: Annotated[
        str | None, Query(max_length=64, description="Start after this job id (next_before).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JobPage:
    """Jobs, newest first, a page at a time."""
    jobs = services.store.list_jobs(state, before, limit)
    return JobPage(
        items=[JobView.of(j) for j in jobs],
        next_before=jobs[-1].job_id if len(jobs) == limit else None,
    )


@router.get("/{job_id}", dependencies=[Reader])
def get_job(job_id: JobId, services: Services) -> JobView:
    """A job's state, current round, accuracy and selected sites."""
    return JobView.of(services.store.get(job_id))


@router.get("/{job_id}/rounds", dependencies=[Reader])
def list_rounds(
    job_id: JobId,
    services: Services,
    after: Annotated[
        int, Query(ge=0, le=2**31, description="Start after this round (next_after).")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> RoundPage:
    """A job's recorded rounds in order, a page at a time (stable while the job runs)."""
    rounds = services.store.rounds(job_id, after, limit)
    return RoundPage(
        items=[RoundView.of(r) for r in rounds],
        next_after=rounds[-1].round_index if len(rounds) == limit else None,
    )


@router.post("/{job_id}/cancel", dependencies=[Writer], responses={409: {"model": ErrorBody}})
def cancel_job(job_id: JobId, services: Services) -> JobView:
    """Cancel a job: a queued one at once; a running one aborts its round, keeping every
    whole round. A finished job cannot be cancelled (409)."""
    return JobView.of(services.runner.cancel(job_id))


@router.get(
    "/{job_id}/model",
    dependencies=[Reader],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def download_model(job_id: JobId, services: Services) -> StreamingResponse:
    """The job's newest global model checkpoint as a safetensors file (header X-Round)."""
    checkpoint = services.store.checkpoint(job_id)
    if checkpoint is None:
        raise JobNotFoundError(f"job {job_id} has no checkpoint yet")
    round_index, payload = checkpoint
    filename = f"{job_id}-round-{round_index}.safetensors"
    return StreamingResponse(
        iter(payload.segments),
        media_type="application/octet-stream",
        headers={
            "X-Round": str(round_index),
            "Content-Disposition": f'attachment; filename="{filename}"',
            "Content-Length": str(payload.nbytes),
        },
    )
