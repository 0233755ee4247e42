"""The API of a host's shared application (`python -m tasks.host_app`, tasks/runtime/
shared.py), which the overlord's runner and a task host's agent call on loopback with the
application's token (supervisor/runner/shared.py): its messages as models, one definition
for both sides."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, field_validator

from tasks.protocol import TaskPayload

API = "/sluicegate/host/v1"


class Assignment(BaseModel):
    """POST {API}/tasks: a task to run, with the token its callers must show and where it
    publishes (None: where the application's own --overlord says)."""

    payload: TaskPayload
    token: str
    overlord: str | None = None

    @field_validator("overlord")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("an http:// or https:// URL")
        return value

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"payload": self.payload.to_json(), "token": self.token}
        if self.overlord is not None:
            body["overlord"] = self.overlord
        return body


class HostedTask(BaseModel):
    """A task the application runs or ran: its exit code once it ended."""

    running: bool
    exitCode: int | None = None
    killed: bool = False


class HostTasks(BaseModel):
    """GET {API}/tasks: its Spark's state (STARTING, READY, or why it failed) and its tasks."""

    spark: str
    tasks: dict[str, HostedTask]


class Assigned(BaseModel):
    task: str


class Killed(BaseModel):
    """POST {API}/tasks/{id}/kill: whether a running task was killed."""

    killed: bool


class Forgotten(BaseModel):
    """DELETE {API}/tasks/{id}: whether an ended task was forgotten."""

    forgotten: bool
