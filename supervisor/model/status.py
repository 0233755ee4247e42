"""What the reconciler publishes of each supervisor after every pass, and the API reads: a
frozen SupervisorStatus per supervisor in a StatusStore. A pass builds the next status from the
last one and what it saw; a reader always gets a whole status, never one half-written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from supervisor.model.views import Snapshot
from tasks.partitions import Offsets, PartitionKey, offsets_from_json, offsets_json, parse_key
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
    stream_exception: bool = False  # Kafka could not be reached or described

    def to_json(self) -> dict[str, str | bool]:
        return {
            "timestamp": self.timestamp,
            "exceptionClass": self.exception_class,
            "message": self.message,
            "streamException": self.stream_exception,
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

    def to_json(self) -> dict[str, Any]:
        """What followers read of it (supervisor_status): all but the snapshot, whose tasks
        a follower reads from the DB instead."""
        return {
            "state": str(self.state),
            "detailedState": str(self.detailed_state),
            "healthy": self.healthy,
            "consecutiveFailures": self.consecutive_failures,
            "connectedOnce": self.connected_once,
            "passes": self.passes,
            "partitions": [str(p) for p in self.partitions],
            "latest": offsets_json(self.latest),
            "offsetsUpdated": self.offsets_updated,
            "recentErrors": [e.to_json() for e in self.recent_errors],
            "current": {t: offsets_json(o) for t, o in self.current.items()},
            "started": {t: since.isoformat() for t, since in self.started.items()},
            "taskMetrics": {t: m.model_dump() for t, m in self.task_metrics.items()},
            "queueSize": self.queue_size,
            "lastPassS": self.last_pass_s,
            "passSeconds": self.pass_seconds,
            "passCount": self.pass_count,
            "recentPasses": list(self.recent_passes),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> SupervisorStatus:
        return cls(
            state=SupervisorState(raw["state"]),
            detailed_state=SupervisorState(raw["detailedState"]),
            healthy=bool(raw["healthy"]),
            consecutive_failures=int(raw["consecutiveFailures"]),
            connected_once=bool(raw["connectedOnce"]),
            passes=int(raw["passes"]),
            partitions=tuple(parse_key(p) for p in raw["partitions"]),
            latest=offsets_from_json(raw["latest"]),
            offsets_updated=raw["offsetsUpdated"],
            recent_errors=tuple(
                PassError(
                    e["timestamp"],
                    e["exceptionClass"],
                    e["message"],
                    bool(e.get("streamException", False)),
                )
                for e in raw["recentErrors"]
            ),
            current={t: offsets_from_json(o) for t, o in raw["current"].items()},
            started={t: datetime.fromisoformat(s) for t, s in raw["started"].items()},
            task_metrics={t: TaskMetrics.model_validate(m) for t, m in raw["taskMetrics"].items()},
            queue_size=int(raw["queueSize"]),
            last_pass_s=float(raw["lastPassS"]),
            pass_seconds=float(raw["passSeconds"]),
            pass_count=int(raw["passCount"]),
            recent_passes=tuple(float(s) for s in raw["recentPasses"]),
        )

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
    per supervisor), read by any thread; a status is replaced whole, so no lock is needed.
    `sink`: where each change is written on as well (the metadata DB, for followers)."""

    def __init__(self, sink: StatusSink | None = None) -> None:
        self._statuses: dict[str, SupervisorStatus] = {}
        self.sink = sink

    def get(self, supervisor_id: str) -> SupervisorStatus | None:
        return self._statuses.get(supervisor_id)

    def put(self, supervisor_id: str, status: SupervisorStatus) -> None:
        self._statuses[supervisor_id] = status
        if self.sink is not None:
            self.sink(supervisor_id, status)

    def drop(self, supervisor_id: str) -> None:
        self._statuses.pop(supervisor_id, None)
        if self.sink is not None:
            self.sink(supervisor_id, None)

    def clear(self) -> None:
        """Forget every status (an overlord that stopped leading: they are old now)."""
        self._statuses.clear()

    def items(self) -> list[tuple[str, SupervisorStatus]]:
        return list(self._statuses.items())


StatusSink = Callable[[str, SupervisorStatus | None], None]  # None: the supervisor is gone
