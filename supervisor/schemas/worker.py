"""The messages between a task host and the overlords, one definition for both sides: its
heartbeat (supervisor/worker/agent.py -> supervisor/api/workers.py), and its API
(supervisor/worker/api.py) that the leader's runner reads (supervisor/clients/worker_api.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from tasks.protocol import TaskReport


class Heartbeat(BaseModel):
    """POST /druid-internal/v1/workers: all a task host says of itself, at every beat (the
    first registers it; services/workers.py checks each field)."""

    host: str  # its API's host:port, its name
    scheme: str
    ip: str
    capacity: int
    version: str
    category: str
    token: str  # the overlords' calls to it carry it


class HeartbeatAnswer(BaseModel):
    """What a task host's tasks must share with the rest of the cluster."""

    deepStorage: str
    heartbeatTimeoutS: float | None = None


class Placement(BaseModel):
    """POST /druid-internal/v1/worker/assignTask: where the task serves its chat API, its
    log's path and its token."""

    task: str
    host: str
    port: int
    scheme: str
    logPath: str
    token: str


class WorkerExit(BaseModel):
    """A task that ended on the host: its exit code (None when unknown) and its report (None
    when it left none, or none that reads as one)."""

    task: str
    exitCode: int | None = None
    report: TaskReport | None = None

    @field_validator("report", mode="wrap")
    @classmethod
    def _readable(cls, value: Any, handler: Any) -> TaskReport | None:
        try:
            found: TaskReport | None = handler(value)
        except ValidationError:
            return None
        return found


class WorkerState(BaseModel):
    """GET /druid-internal/v1/worker: what runs on the host and what ended (the sync). An
    exit entry that does not read as one is passed over, not the whole answer."""

    host: str = ""
    running: list[str] = Field(default_factory=list)
    exited: list[WorkerExit] = Field(default_factory=list)

    @field_validator("exited", mode="before")
    @classmethod
    def _readable_exits(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [e for e in value if isinstance(e, dict) and isinstance(e.get("task"), str)]


class ShutdownAnswer(BaseModel):
    """POST /druid/worker/v1/task/{id}/shutdown: whether a running task was killed."""

    task: str
    killed: bool
