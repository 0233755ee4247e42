"""The overlord's client of a task's control API (Druid's chat endpoints)."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx

from supervisor.db.models import TaskRow
from tasks.protocol import TOKEN_HEADER


class TaskApiError(Exception):
    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client. httpx builds a new one per client otherwise, loading
    the CA bundle each time (tens of ms of CPU), and a client is made per task and pass."""
    return httpx.create_ssl_context()


def reachable(row: TaskRow) -> bool:
    """A running task with a location and a token: its control API can be asked."""
    return row.status == "RUNNING" and row.location_port is not None and row.token is not None


class TaskApiClient:
    def __init__(
        self, host: str, port: int, task_id: str, token: str, timeout: float = 10.0
    ) -> None:
        self.http = httpx.Client(
            base_url=f"http://{host}:{port}/druid/worker/v1/chat/{task_id}",
            timeout=timeout,
            headers={TOKEN_HEADER: token},
            verify=_tls(),
        )

    @classmethod
    def for_task(cls, row: TaskRow, timeout: float = 10.0) -> TaskApiClient:
        """The client of a recorded task, at its location and with its token."""
        return cls(
            row.location_host or "127.0.0.1",
            row.location_port or 0,
            row.id,
            row.token or "",
            timeout,
        )

    def __enter__(self) -> TaskApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise TaskApiError(None, f"task unreachable: {type(exc).__name__}") from None
        if response.status_code >= 400:
            message = response.json().get("error", response.text) if response.content else ""
            raise TaskApiError(response.status_code, str(message))
        return response

    def get(self, path: str) -> Any:
        return self.call("GET", path).json()
