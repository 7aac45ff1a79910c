"""The job API in-process (TestClient) over a scripted execution: auth, validation, limits,
lifecycle, pagination, cancel, sites, health and metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from powertrip.aggregator.api import ApiServices, ApiSettings, create_app
from powertrip.aggregator.api.schemas import SiteView
from powertrip.aggregator.metrics import JobsCollector
from powertrip.aggregator.runner import JobRunner
from powertrip.aggregator.store import JobStore, MemoryJobStore, SqliteJobStore
from powertrip.selection import POLICY_NAMES
from powertrip.tasks import TASK_NAMES
from powertrip.transport.payload import decode_params
from scripted_jobs import ScriptedExecution, wait_for

TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SITE = SiteView(
    site_id="site-0", address="127.0.0.1:1", distance_km=100.0, gpus=1, gpu_power_w=300.0,
    power_available_ratio=0.5, power_w=150.0, power_limit_w=300.0, power_source="constant",
    energy_j=10.0, rtt_s=0.01, bandwidth_bytes_per_s=1e8, last_seen_unix_s=1.0, healthy=True,
    error="",
)  # fmt: skip


class Unreachable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def no_profiler() -> list[SiteView]:
    raise Unreachable()


def make_client(
    store: JobStore,
    execution: ScriptedExecution,
    *,
    auth_reads: bool = False,
    max_body_bytes: int = 64 * 1024,
    list_sites: Callable[[], list[SiteView]] = lambda: [SITE],
    limit: int = 1,
) -> TestClient:
    registry = CollectorRegistry()
    registry.register(JobsCollector(store.counts))
    services = ApiServices(store, JobRunner(store, execution, limit), list_sites)
    app = create_app(ApiSettings(TOKEN, auth_reads, max_body_bytes), services, registry)
    return TestClient(app)


@pytest.fixture
def execution() -> ScriptedExecution:
    return ScriptedExecution([0.2, 0.4, 0.6, 0.7, 0.8, 0.9], gated=True)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    opened: JobStore = MemoryJobStore() if request.param == "memory" else SqliteJobStore(tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def client(store: JobStore, execution: ScriptedExecution) -> Iterator[TestClient]:
    with make_client(store, execution) as client:
        yield client
        for _ in range(100):  # lets any gated job finish so the runner stops at once
            execution.permits.release()


def submit(client: TestClient, **spec: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"target_accuracy": 0.5, **spec}, headers=AUTH)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def state_of(client: TestClient, job_id: str) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
    return body


# Auth


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({}, 401, "needs the API token"),
        ({"Authorization": f"Basic {TOKEN}"}, 401, "needs the API token"),
        ({"Authorization": "Bearer wrong"}, 403, "not valid"),
        ({"Authorization": f"Bearer {TOKEN}x"}, 403, "not valid"),
    ],
)
def test_mutating_calls_need_the_token(
    client: TestClient, headers: dict[str, str], status: int, says: str
) -> None:
    """Submit and cancel without the right bearer token get 401/403 JSON, and change nothing."""
    for path in ("/v1/jobs", "/v1/jobs/anything/cancel"):
        response = client.post(path, json={}, headers=headers)
        assert response.status_code == status
        assert says in response.json()["detail"]
        assert TOKEN not in response.text
    if status == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/v1/jobs").json()["items"] == []


def test_reads_are_open_unless_the_settings_close_them(
    store: JobStore, execution: ScriptedExecution
) -> None:
    """With auth_reads, every read endpoint needs the token too; /healthz and /metrics do not."""
    with make_client(store, execution, auth_reads=True) as client:
        for path in ("/v1/jobs", "/v1/jobs/x", "/v1/jobs/x/rounds", "/v1/sites"):
            assert client.get(path).status_code == 401, path
        assert client.get("/v1/jobs", headers=AUTH).status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_the_token_is_never_logged_or_echoed(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither logs, errors, nor the settings' repr contain the token."""
    caplog.set_level(logging.DEBUG)
    job = submit(client)
    client.post("/v1/jobs", json={"task": TOKEN}, headers=AUTH)  # a 422 must not echo inputs
    client.post(f"/v1/jobs/{job['id']}/cancel", headers={"Authorization": "Bearer nope"})
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(ApiSettings(TOKEN))
    response = client.post("/v1/jobs", json={"seed": TOKEN}, headers=AUTH)
    assert TOKEN not in response.text


# Bad input


def test_an_invalid_spec_names_every_bad_field(client: TestClient) -> None:
    """422 lists each bad field by its location."""
    body = {"target_accuracy": 1.5, "max_rounds": 0, "batch_size": "many", "colour": "red"}
    response = client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422
    locations = {tuple(problem["loc"]) for problem in response.json()["detail"]}
    assert locations == {
        ("body", "target_accuracy"),
        ("body", "max_rounds"),
        ("body", "batch_size"),
        ("body", "colour"),
    }


@pytest.mark.parametrize(
    ("body", "field", "valid"),
    [
        ({"task": "imagenet"}, "task", TASK_NAMES),
        ({"policy": {"name": "best"}}, "policy", POLICY_NAMES),
        ({"task": "shakespeare", "model": "mlp"}, "model", ("lstm",)),
        ({"policy": {"name": "static-k", "kk": 3}}, "policy", ("k", "ranker")),
    ],
)
def test_unknown_names_list_the_valid_ones(
    client: TestClient, body: dict[str, Any], field: str, valid: tuple[str, ...]
) -> None:
    """An unknown task, model, policy or policy setting gets 422 with every valid name."""
    response = client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", field]
    for name in valid:
        assert name in problem["msg"]


def test_malformed_json_is_a_422_not_a_500(client: TestClient) -> None:
    """A body that is not JSON, or JSON of the wrong shape, is refused with 422."""
    for content in (b"{not json", b"[1, 2]", b"NaN"):
        response = client.post(
            "/v1/jobs", content=content, headers={**AUTH, "Content-Type": "application/json"}
        )
        assert response.status_code == 422, content


def test_non_finite_numbers_are_refused(client: TestClient) -> None:
    """Infinity and NaN (which Python's JSON parser accepts) never reach a job."""
    content = b'{"learning_rate": Infinity, "target_accuracy": NaN}'
    response = client.post(
        "/v1/jobs", content=content, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert {p["loc"][-1] for p in response.json()["detail"]} == {
        "learning_rate",
        "target_accuracy",
    }


def test_an_oversized_body_is_refused_declared_or_streamed(
    store: JobStore, execution: ScriptedExecution
) -> None:
    """A body over the limit gets 413, whether its Content-Length says so or it is chunked;
    no job is created."""
    with make_client(store, execution, max_body_bytes=1024) as client:
        big = b'{"policy": {"name": "powertrip", "pad": "' + b"x" * 2000 + b'"}}'
        declared = client.post(
            "/v1/jobs", content=big, headers={**AUTH, "Content-Type": "application/json"}
        )
        streamed = client.post(
            "/v1/jobs",
            content=iter([big[:600], big[600:]]),
            headers={**AUTH, "Content-Type": "application/json"},
        )
        for response in (declared, streamed):
            assert response.status_code == 413
            assert "larger than 1024 bytes" in response.json()["detail"]
        assert client.get("/v1/jobs").json()["items"] == []


def test_unknown_query_parameters_are_refused(client: TestClient) -> None:
    """A misspelt query parameter is a 422 naming it and the valid ones, not ignored."""
    response = client.get("/v1/jobs", params={"stat": "queued"})
    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["query", "stat"]
    assert "before, limit, state" in problem["msg"]


def test_unknown_job_is_404_json(client: TestClient) -> None:
    """Every route of a missing job answers 404 with a JSON detail naming it."""
    for method, path in [
        ("GET", "/v1/jobs/nope"),
        ("GET", "/v1/jobs/nope/rounds"),
        ("GET", "/v1/jobs/nope/model"),
        ("POST", "/v1/jobs/nope/cancel"),
    ]:
        response = client.request(method, path, headers=AUTH)
        assert response.status_code == 404, path
        assert "nope" in response.json()["detail"]


# Lifecycle


def test_a_job_runs_to_success_and_its_model_downloads(
    client: TestClient, execution: ScriptedExecution
) -> None:
    """Submitted -> queued/running -> succeeded, with rounds, accuracy and the final model."""
    job = submit(client)
    assert job["state"] in ("queued", "running")
    assert job["spec"]["task"] == "mnist"
    for _ in range(3):
        execution.permits.release()
    wait_for(lambda: state_of(client, job["id"])["state"] == "succeeded", "success")
    done = state_of(client, job["id"])
    assert (done["current_round"], done["accuracy"]) == (3, 0.6)
    assert done["selected_sites"] == ["a", "b"]
    assert done["reason"].startswith("reached 0.5 at round 3")
    model = client.get(f"/v1/jobs/{job['id']}/model")
    assert model.headers["X-Round"] == "3"
    assert decode_params(model.content, "test")["w"].tolist() == [3.0, 3.0]


def test_rounds_page_stably_while_the_job_runs(
    client: TestClient, execution: ScriptedExecution
) -> None:
    """Paging with next_after gives every round once, in order, as rounds keep landing."""
    job = submit(client, target_accuracy=0.95, max_rounds=6)
    rounds = f"/v1/jobs/{job['id']}/rounds"
    for _ in range(3):
        execution.permits.release()
    wait_for(lambda: state_of(client, job["id"])["current_round"] == 3, "three rounds")
    first = client.get(rounds, params={"limit": 2}).json()
    for _ in range(3):
        execution.permits.release()
    wait_for(lambda: state_of(client, job["id"])["state"] == "failed", "the budget")
    seen = [r["round_index"] for r in first["items"]]
    after = first["next_after"]
    while after is not None:
        page = client.get(rounds, params={"limit": 2, "after": after}).json()
        seen += [r["round_index"] for r in page["items"]]
        after = page["next_after"]
    assert seen == [1, 2, 3, 4, 5, 6]


def test_cancel_a_running_job_mid_round(client: TestClient, execution: ScriptedExecution) -> None:
    """Cancel during round 2 keeps round 1 only; a second cancel is a 409 conflict."""
    job = submit(client)
    execution.permits.release()
    wait_for(lambda: state_of(client, job["id"])["current_round"] == 1, "round 1")
    wait_for(lambda: job["id"] in execution.in_round, "round 2 to start")
    response = client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH)
    assert response.status_code == 200
    assert response.json()["cancel_requested"] is True
    wait_for(lambda: state_of(client, job["id"])["state"] == "cancelled", "cancelled")
    rounds = client.get(f"/v1/jobs/{job['id']}/rounds").json()["items"]
    assert [r["round_index"] for r in rounds] == [1]
    again = client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH)
    assert again.status_code == 409
    assert "already cancelled" in again.json()["detail"]


def test_jobs_list_filters_and_pages(client: TestClient) -> None:
    """GET /v1/jobs is newest first, filters by state and pages with next_before."""
    ids = [submit(client)["id"] for _ in range(3)]  # the first runs, two wait
    queued = client.get("/v1/jobs", params={"state": "queued"}).json()["items"]
    assert [j["id"] for j in queued] == [ids[2], ids[1]]
    page = client.get("/v1/jobs", params={"limit": 2}).json()
    rest = client.get("/v1/jobs", params={"limit": 2, "before": page["next_before"]}).json()
    assert [j["id"] for j in page["items"] + rest["items"]] == ids[::-1]
    assert rest["next_before"] is None
    assert client.get("/v1/jobs", params={"state": "sleeping"}).status_code == 422


# Sites, health, metrics


def test_sites_come_from_the_profiler(store: JobStore, execution: ScriptedExecution) -> None:
    """/v1/sites lists the profiler's profiles; a silent profiler gives 503, not 500."""
    with make_client(store, execution) as client:
        assert client.get("/v1/sites").json() == [SITE.model_dump()]
    with make_client(store, execution, list_sites=no_profiler) as client:
        response = client.get("/v1/sites")
        assert response.status_code == 503
        assert "UNAVAILABLE" in response.json()["detail"]


def test_health_and_metrics_count_jobs(client: TestClient) -> None:
    """/healthz and the powertrip_jobs gauge report running and queued jobs."""
    submit(client)
    submit(client)
    wait_for(lambda: client.get("/healthz").json()["running_jobs"] == 1, "one running")
    assert client.get("/healthz").json() == {"status": "ok", "running_jobs": 1, "queued_jobs": 1}
    text = client.get("/metrics").text
    assert 'powertrip_jobs{state="queued"} 1.0' in text
    assert 'powertrip_jobs{state="running"} 1.0' in text


def test_openapi_documents_every_route(client: TestClient) -> None:
    """/openapi.json lists the job, site and health routes with bearer auth; /docs serves."""
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) >= {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/rounds",
        "/v1/jobs/{job_id}/cancel",
        "/v1/jobs/{job_id}/model",
        "/v1/sites",
        "/healthz",
        "/metrics",
    }
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    assert client.get("/docs").status_code == 200
