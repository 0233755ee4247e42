"""The overlord's client of a task's control API (Druid's chat endpoints)."""

from __future__ import annotations

import functools
from typing import Any

import httpx

from supervisor.db.models import TaskRow
from tasks.protocol import TOKEN_HEADER


class TaskApiError(Exception):
    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@functools.cache
def _pool() -> httpx.Client:
    """One connection pool for every task client, shared by all threads (httpx's Client is
    thread-safe): the loops ask each running task for its offsets on every pass, and a client
    of its own per task and pass cost a new client (with its TLS context: tens of ms of CPU)
    and a new TCP connection each time. Idle connections to a task close after a minute."""
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=128, keepalive_expiry=60)
    return httpx.Client(limits=limits, verify=httpx.create_ssl_context())


def reachable(row: TaskRow) -> bool:
    """A running task with a location and a token: its control API can be asked."""
    return row.status == "RUNNING" and row.location_port is not None and row.token is not None


class TaskApiClient:
    """A task's control API, at /druid/worker/v1/chat/{task id}, with its token."""

    def __init__(
        self, host: str, port: int, task_id: str, token: str, timeout: float = 10.0
    ) -> None:
        self.base = f"http://{host}:{port}/druid/worker/v1/chat/{task_id}"
        self.headers = {TOKEN_HEADER: token}
        self.timeout = timeout

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
        pass  # the connection stays in the shared pool

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = _pool().request(
                method, self.base + path, headers=self.headers, timeout=self.timeout, **kwargs
            )
        except httpx.TransportError as exc:
            raise TaskApiError(None, f"task unreachable: {type(exc).__name__}") from None
        if response.status_code >= 400:
            message = response.json().get("error", response.text) if response.content else ""
            raise TaskApiError(response.status_code, str(message))
        return response

    def get(self, path: str) -> Any:
        return self.call("GET", path).json()
