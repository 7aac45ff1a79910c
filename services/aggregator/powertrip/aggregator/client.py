"""A client of the job API (httpx): what `powertrip submit | jobs | watch | cancel` and the demo
use. Errors come back as `ApiError` with the server's explanation, every bad field named."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from powertrip.errors import PowerTripError


class ApiError(PowerTripError):
    """The API refused a call, or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ApiClient:
    """Calls to the aggregator's job API at `url`, with the bearer `token` when given."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url
        self.http = httpx.Client(
            base_url=url, headers=headers, timeout=timeout_s, transport=transport
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise ApiError(f"cannot reach the aggregator at {self.url}: {error}") from None
        if response.is_success:
            return response.json()
        raise ApiError(
            f"{method} {path}: {response.status_code} {_explain(response)}", response.status_code
        )

    def submit(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Queue a job; the job as the API shows it."""
        job: dict[str, Any] = self._call("POST", "/v1/jobs", json=dict(spec))
        return job

    def jobs(
        self, state: str | None = None, before: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        """A page of jobs, newest first."""
        params = {k: v for k, v in (("state", state), ("before", before)) if v is not None}
        page: dict[str, Any] = self._call("GET", "/v1/jobs", params={**params, "limit": limit})
        return page

    def job(self, job_id: str) -> dict[str, Any]:
        """One job."""
        job: dict[str, Any] = self._call("GET", f"/v1/jobs/{job_id}")
        return job

    def rounds(self, job_id: str, after: int = 0, limit: int = 100) -> dict[str, Any]:
        """A page of a job's rounds."""
        page: dict[str, Any] = self._call(
            "GET", f"/v1/jobs/{job_id}/rounds", params={"after": after, "limit": limit}
        )
        return page

    def rounds_after(self, job_id: str, after: int = 0) -> Iterator[dict[str, Any]]:
        """Every recorded round with index > `after`, following the pages."""
        cursor: int | None = after
        while cursor is not None:
            page = self.rounds(job_id, cursor)
            yield from page["items"]
            cursor = page["next_after"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a job."""
        job: dict[str, Any] = self._call("POST", f"/v1/jobs/{job_id}/cancel")
        return job

    def sites(self) -> list[dict[str, Any]]:
        """The profiler's sites."""
        sites: list[dict[str, Any]] = self._call("GET", "/v1/sites")
        return sites

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _explain(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:200]
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(p) for p in problem.get('loc', [])[1:]) or 'body'}: "
            f"{problem.get('msg')}"
            for problem in detail
        )
    return str(detail)
