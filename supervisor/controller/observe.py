"""Observe: read everything a pass needs (spec, tasks, committed offsets, the stream)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clients.task_api import TaskApiClient, TaskApiError
from supervisor.controller.model import RUNNING, Snapshot, SpecView, TaskView
from supervisor.db.models import SupervisorSpecRow, TaskRow
from supervisor.db.repositories import OffsetsRepository, SpecRepository, TaskRepository
from supervisor.schemas.periods import duration_millis
from supervisor.schemas.spec import SupervisorSpec, parse_supervisor_spec


class StreamError(RuntimeError):
    """Kafka could not be reached or the topic could not be described."""


def spec_view(row: SupervisorSpecRow, spec: SupervisorSpec) -> SpecView:
    io = spec.spec.ioConfig
    return SpecView(
        version=row.id,
        task_count=io.taskCount,
        replicas=io.replicas,
        task_duration_s=duration_millis(io.taskDuration) / 1000,
        completion_timeout_s=duration_millis(io.completionTimeout) / 1000,
        use_earliest_offset=io.useEarliestOffset,
        stop_task_count=io.stopTaskCount,
        repartition_transition_s=duration_millis(io.repartitionTransitionDuration) / 1000,
    )


def _offsets(raw: dict[str, Any] | None) -> dict[int, int] | None:
    return None if raw is None else {int(p): int(o) for p, o in raw.items()}


def task_view(row: TaskRow) -> TaskView:
    io = row.payload["ioConfig"]
    start = _offsets(io["startSequenceNumbers"]["partitionSequenceNumberMap"]) or {}
    return TaskView(
        id=row.id,
        group=row.group_id or 0,
        identity=str(row.payload.get("context", {}).get("identity", "")),
        start=start,
        status=row.status,
        created_at=row.created_at,
        end=_offsets(row.end_offsets),
        rolled_at=row.rolled_at,
    )


class StreamReader:
    """Partitions and offsets of the supervisor's topic (a seam for tests of the loop)."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s

    def describe(
        self, consumer_properties: dict[str, Any], topic: str
    ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
        from confluent_kafka.admin import AdminClient

        from tasks.kafka_offsets import OffsetReader

        servers = str(consumer_properties["bootstrap.servers"])
        try:
            metadata = AdminClient({"bootstrap.servers": servers}).list_topics(
                topic, timeout=self.timeout_s
            )
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise StreamError(
                    f"topic {topic} is not available: {described and described.error}"
                )
            partitions = tuple(sorted(described.partitions))
            reader = OffsetReader(consumer_properties, timeout=self.timeout_s)
            return (
                partitions,
                reader.earliest(topic, list(partitions)),
                reader.latest(topic, list(partitions)),
            )
        except StreamError:
            raise
        except Exception as exc:
            raise StreamError(f"cannot reach Kafka at {servers}: {exc}") from exc


@dataclass
class TaskProbe:
    """What running tasks say of themselves: where they read now, and since when they read
    (a task's start never changes, so it is asked once and remembered)."""

    current: dict[str, dict[int, int]] = field(default_factory=dict)
    started: dict[str, datetime] = field(default_factory=dict)

    def probe(self, rows: list[TaskRow]) -> None:
        current: dict[str, dict[int, int]] = {}
        for row in rows:
            if row.status != RUNNING or row.token is None or row.location_port is None:
                continue
            try:
                with TaskApiClient.for_task(row, timeout=2.0) as client:
                    offsets = client.get("/offsets/current")
                    if row.id not in self.started:
                        since = client.get("/time/start")
                        if since:
                            self.started[row.id] = datetime.fromisoformat(since)
            except TaskApiError:
                continue
            current[row.id] = {int(p): int(o) for p, o in offsets.items()}
        self.current = current
        running = {row.id for row in rows if row.status == RUNNING}
        self.started = {k: v for k, v in self.started.items() if k in running}


def observe(
    session: Session,
    supervisor_id: str,
    now: datetime,
    stream: StreamReader,
    handoff_requested: frozenset[int] = frozenset(),
    probe: TaskProbe | None = None,
) -> tuple[Snapshot, SupervisorSpec, SupervisorSpecRow] | None:
    """The snapshot of one supervisor, or None when it has no spec at all."""
    row = SpecRepository(session).latest(supervisor_id)
    if row is None:
        return None
    tombstone = row.tombstone
    if tombstone:  # terminated: wind down with the last real spec
        history = [r for r in SpecRepository(session).history(supervisor_id) if not r.tombstone]
        if not history:
            return None
        row = history[0]
    spec = parse_supervisor_spec(row.payload)
    view = spec_view(row, spec)
    io = spec.spec.ioConfig
    topic = io.topic or ""
    partitions, earliest, latest = stream.describe(io.consumerProperties, topic)
    committed_row = OffsetsRepository(session).get(supervisor_id)
    committed = _offsets(committed_row.offsets if committed_row else None) or {}
    since = now - timedelta(seconds=view.completion_timeout_s + 60)
    rows = TaskRepository(session).of_supervisor(supervisor_id, since)
    probe = probe or TaskProbe()
    probe.probe(rows)
    tasks = tuple(replace(task_view(t), reading_since=probe.started.get(t.id)) for t in rows)
    snapshot = Snapshot(
        supervisor_id=supervisor_id,
        spec=view,
        now=now,
        suspended=row.suspended or tombstone,
        partitions=partitions,
        earliest=earliest,
        latest=latest,
        committed=committed,
        tasks=tasks,
        handoff_requested=handoff_requested,
        terminated=tombstone,
    )
    return snapshot, spec, row
