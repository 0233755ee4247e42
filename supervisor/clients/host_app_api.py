"""The HTTP client of a host's shared application (`python -m tasks.host_app`), on loopback,
with the application's token: its messages are tasks/host_protocol.py's models. Every call
answers, or raises OSError saying why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from tasks.host_protocol import API, Assigned, Assignment, Forgotten, HostedTask, HostTasks, Killed
from tasks.protocol import TOKEN_HEADER
from tasks.tls import client_context

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class HostApp:
    """A running application: its process, where it serves, and its token."""

    pid: int
    port: int
    scheme: str
    token: str


class HostAppClient:
    def __init__(self, host: str, timeout: float = 10.0) -> None:
        self.host = host  # where the applications serve
        self.http = httpx.Client(timeout=timeout, verify=client_context())

    def _call(self, app: HostApp, method: str, path: str, answer: type[M], **kwargs: Any) -> M:
        url = f"{app.scheme}://{self.host}:{app.port}{API}{path}"
        try:
            response = self.http.request(method, url, headers={TOKEN_HEADER: app.token}, **kwargs)
        except httpx.HTTPError as exc:
            raise OSError(f"task host application: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise OSError(f"task host application: {response.status_code} {response.text[:200]}")
        try:
            return answer.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise OSError(f"task host application: not a {answer.__name__}: {exc}") from None

    def tasks(self, app: HostApp) -> dict[str, HostedTask]:
        return self._call(app, "GET", "/tasks", HostTasks).tasks

    def assign(self, app: HostApp, assignment: Assignment) -> None:
        self._call(app, "POST", "/tasks", Assigned, json=assignment.to_wire())

    def kill(self, app: HostApp, task_id: str) -> bool:
        """Whether a running task was killed."""
        return self._call(app, "POST", f"/tasks/{task_id}/kill", Killed).killed

    def forget(self, app: HostApp, task_id: str) -> bool:
        """Whether an ended task was forgotten."""
        return self._call(app, "DELETE", f"/tasks/{task_id}", Forgotten).forgotten
