"""What the reconciler publishes of each supervisor after every pass, and the API reads: a
frozen SupervisorStatus per supervisor in a StatusStore. A pass builds the next status from the
last one and what it saw; a reader always gets a whole status, never one half-written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from supervisor.model.views import Snapshot
from tasks.partitions import Offsets, PartitionKey
from tasks.protocol import TaskMetrics

UNHEALTHY_AFTER = 3  # Druid's unhealthinessThreshold default
RECENT_ERRORS = 10  # kept per supervisor, as Druid's recentErrors
PASS_SAMPLES = 64  # durations of the most recent passes kept for percentiles


class SupervisorState(StrEnum):
    """Druid's supervisor states (state and detailedState)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    IDLE = "IDLE"
    SUSPENDED = "SUSPENDED"
    UNHEALTHY_SUPERVISOR = "UNHEALTHY_SUPERVISOR"
    UNABLE_TO_CONNECT_TO_STREAM = "UNABLE_TO_CONNECT_TO_STREAM"
    LOST_CONTACT_WITH_STREAM = "LOST_CONTACT_WITH_STREAM"


@dataclass(frozen=True)
class PassError:
    """One failed pass, as Druid's recentErrors lists it."""

    timestamp: str
    exception_class: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {
            "timestamp": self.timestamp,
            "exceptionClass": self.exception_class,
            "message": self.message,
        }


@dataclass(frozen=True)
class SupervisorStatus:
    state: SupervisorState = SupervisorState.PENDING
    detailed_state: SupervisorState = SupervisorState.PENDING
    healthy: bool = True
    consecutive_failures: int = 0
    connected_once: bool = False
    passes: int = 0  # passes that succeeded
    partitions: tuple[PartitionKey, ...] = ()
    latest: Offsets = field(default_factory=dict)
    offsets_updated: str | None = None
    recent_errors: tuple[PassError, ...] = ()
    current: Mapping[str, Offsets] = field(default_factory=dict)  # task id -> offsets
    started: Mapping[str, datetime] = field(default_factory=dict)  # task id -> reading since
    task_metrics: Mapping[str, TaskMetrics] = field(default_factory=dict)  # task -> counters
    queue_size: int = 0  # requests waiting for the next pass
    last_pass_s: float = 0.0
    pass_seconds: float = 0.0  # all passes, failed ones too
    pass_count: int = 0
    recent_passes: tuple[float, ...] = ()
    snapshot: Snapshot | None = None  # what the last good pass observed (the status serves it)

    def timed(self, seconds: float, queue_size: int) -> SupervisorStatus:
        """The status after a pass (good or failed) that took `seconds`."""
        return replace(
            self,
            last_pass_s=seconds,
            pass_seconds=self.pass_seconds + seconds,
            pass_count=self.pass_count + 1,
            recent_passes=(*self.recent_passes, seconds)[-PASS_SAMPLES:],
            queue_size=queue_size,
        )

    def failed(self, error: PassError, stream_error: bool) -> SupervisorStatus:
        """The status after a failed pass: unhealthy from the UNHEALTHY_AFTER-th in a row."""
        failures = self.consecutive_failures + 1
        errors = (*self.recent_errors, error)[-RECENT_ERRORS:]
        if failures < UNHEALTHY_AFTER:
            return replace(self, consecutive_failures=failures, recent_errors=errors)
        detailed = SupervisorState.UNHEALTHY_SUPERVISOR
        if stream_error:
            detailed = (
                SupervisorState.LOST_CONTACT_WITH_STREAM
                if self.connected_once
                else SupervisorState.UNABLE_TO_CONNECT_TO_STREAM
            )
        return replace(
            self,
            consecutive_failures=failures,
            recent_errors=errors,
            healthy=False,
            state=SupervisorState.UNHEALTHY_SUPERVISOR,
            detailed_state=detailed,
        )


class StatusStore:
    """The latest status of each supervisor. Written by the supervisor's own pass (one writer
    per supervisor), read by any thread; a status is replaced whole, so no lock is needed."""

    def __init__(self) -> None:
        self._statuses: dict[str, SupervisorStatus] = {}

    def get(self, supervisor_id: str) -> SupervisorStatus | None:
        return self._statuses.get(supervisor_id)

    def put(self, supervisor_id: str, status: SupervisorStatus) -> None:
        self._statuses[supervisor_id] = status

    def drop(self, supervisor_id: str) -> None:
        self._statuses.pop(supervisor_id, None)

    def items(self) -> list[tuple[str, SupervisorStatus]]:
        return list(self._statuses.items())
