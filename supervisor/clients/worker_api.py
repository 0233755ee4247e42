"""The overlord's client of a task host's API (supervisor/worker/api.py). Every failure is a
WorkerApiError; an unreachable host has status_code None."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from supervisor.schemas.worker import Placement, ShutdownAnswer, WorkerState
from tasks.protocol import AnyTask, TaskReport
from tasks.tls import client_context

TIMEOUT_S = 5.0
M = TypeVar("M", bound=BaseModel)
ASSIGN_TIMEOUT_S = 30.0


class HostRecord(Protocol):
    """What the client reads of a task host's record (supervisor/db/models.py WorkerRow)."""

    @property
    def host(self) -> str: ...
    @property
    def scheme(self) -> str: ...
    @property
    def token(self) -> str: ...


class WorkerApiError(OSError):
    """An OSError, so a failed assignment is a task that could not be started."""

    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


class WorkerClient:
    def __init__(self, row: HostRecord, transport: httpx.BaseTransport | None = None) -> None:
        self.host = row.host
        self.http = httpx.Client(
            base_url=f"{row.scheme}://{row.host}",
            headers={"Authorization": f"Bearer {row.token}"},
            timeout=TIMEOUT_S,
            transport=transport,
            verify=client_context(),
        )

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise WorkerApiError(None, f"task host {self.host}: {type(exc).__name__}") from None
        except RuntimeError as exc:  # closed meanwhile (its host's token changed)
            raise WorkerApiError(None, f"task host {self.host}: {exc}") from None
        if response.status_code >= 400:
            try:
                reason = response.json().get("error") or response.json().get("detail")
            except (ValueError, AttributeError):
                reason = response.text[:200]
            raise WorkerApiError(
                response.status_code, f"task host {self.host}: {response.status_code} {reason}"
            )
        return response

    def _read(self, response: httpx.Response, answer: type[M]) -> M:
        try:
            return answer.model_validate(response.json())
        except (ValueError, ValidationError):
            raise WorkerApiError(200, f"task host {self.host}: a malformed answer") from None

    def assign(self, task: AnyTask) -> Placement:
        """Start a task there: where it serves its chat API, its log's path and its token."""
        answer = self._call(
            "POST",
            "/druid-internal/v1/worker/assignTask",
            json=task.to_json(),
            timeout=ASSIGN_TIMEOUT_S,
        )
        return self._read(answer, Placement)

    def state(self) -> WorkerState:
        return self._read(self._call("GET", "/druid-internal/v1/worker"), WorkerState)

    def shutdown(self, task_id: str) -> bool:
        answer = self._call("POST", f"/druid/worker/v1/task/{task_id}/shutdown")
        return self._read(answer, ShutdownAnswer).killed

    def report(self, task_id: str) -> TaskReport | None:
        """Its report; None when it left none there (or none that reads as one)."""
        try:
            answer = self._call("GET", f"/druid-internal/v1/worker/task/{task_id}/report")
        except WorkerApiError as exc:
            if exc.status_code == 404:
                return None
            raise
        try:
            return TaskReport.model_validate(answer.json())
        except (ValueError, ValidationError):
            return None

    def log(self, task_id: str) -> str | None:
        try:
            return self._call("GET", f"/druid/worker/v1/task/{task_id}/log").text
        except WorkerApiError as exc:
            if exc.status_code == 404:
                return None
            raise
