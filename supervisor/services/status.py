"""Druid's supervisor status payload, from the metadata DB and the loop's last observation."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.clock import druid_timestamp
from supervisor.db.models import SupervisorSpecRow, TaskRow
from supervisor.db.offsets import OffsetsRepository
from supervisor.db.repositories import AutoscalerRepository, SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.errors import NotFoundError
from supervisor.model.status import SupervisorState, SupervisorStatus
from supervisor.model.views import TaskView, effective_task_count, task_view
from supervisor.schemas.druid_form import druid_form
from supervisor.schemas.secrets import mask_spec
from supervisor.schemas.spec import SupervisorSpec, stored_spec
from tasks.partitions import Offsets, PartitionKey, offsets_from_json, offsets_json
from tasks.protocol import TaskStatusCode
from tasks.spec import legacy_parser
from tasks.spec.periods import duration_millis

T = TypeVar("T")


def partition_lag(
    committed: Offsets, current: Mapping[str, Offsets], latest: Offsets
) -> dict[PartitionKey, int]:
    """Druid's lag: how far each partition's latest offset is behind the furthest any task has
    read (else the committed offset)."""
    furthest = dict(committed)
    for offsets in current.values():
        for partition, offset in offsets.items():
            furthest[partition] = max(furthest.get(partition, 0), offset)
    return {p: max(0, latest[p] - furthest.get(p, 0)) for p in latest}


def states(loop: SupervisorStatus | None, suspended: bool) -> dict[str, object]:
    """Druid's state, detailedState and healthy of a supervisor, from its last pass."""
    if suspended:
        state = detailed = SupervisorState.SUSPENDED
    elif loop is None:
        state = detailed = SupervisorState.PENDING
    else:
        state, detailed = loop.state, loop.detailed_state
    return {
        "healthy": loop.healthy if loop else True,
        "state": str(state),
        "detailedState": str(detailed),
    }


def _running_tasks(
    session: Session, loop: SupervisorStatus | None, supervisor_id: str, now: datetime
) -> list[TaskView]:
    """The running tasks as the last pass saw them (Druid's status is its supervisor's view
    in memory too; a change wakes the supervisor, which passes at once), else (no pass yet)
    as the DB has them."""
    snapshot = loop.snapshot if loop else None
    if snapshot is not None:
        return [task for task in snapshot.tasks if task.running]
    rows = TaskRepository(session).of_supervisor(supervisor_id, now)
    return [task_view(row) for row in rows if row.status == TaskStatusCode.RUNNING]


def status_report(
    session: Session, loop: SupervisorStatus | None, now: datetime, supervisor_id: str
) -> dict[str, object]:
    """Druid's supervisor status; `loop`: the supervisor's status from its last pass."""
    row = SpecRepository(session).active(supervisor_id)
    if row is None:
        raise NotFoundError(f"[{supervisor_id}] does not exist")
    spec = stored_spec(row.id, row.payload)
    io = spec.spec.ioConfig
    duration = timedelta(milliseconds=duration_millis(io.taskDuration))
    # read on each call, not from the last pass: a reset shows at once
    committed = offsets_from_json(OffsetsRepository(session).offsets(supervisor_id) or {})
    tasks = _running_tasks(session, loop, supervisor_id, now)
    current = loop.current if loop else {}
    latest = loop.latest if loop else {}
    completion = timedelta(milliseconds=duration_millis(io.completionTimeout))
    active, publishing = [], []
    for view in tasks:
        reading = current.get(view.id, {})
        began = (loop.started.get(view.id) if loop else None) or view.created_at
        ends = (view.rolled_at or now) + completion if view.end else began + duration
        entry: dict[str, Any] = {
            "id": view.id,
            "startingOffsets": offsets_json(view.start),
            "startTime": druid_timestamp(began),
            "remainingSeconds": max(0, int((ends - now).total_seconds())),
            "type": "PUBLISHING" if view.end is not None else "ACTIVE",
            "taskGroupId": view.group,
            "currentOffsets": offsets_json(reading),
            "lag": offsets_json(
                {p: max(0, latest[p] - o) for p, o in reading.items() if p in latest}
            )
            if reading
            else None,
        }
        if view.end is not None:
            entry["endOffsets"] = offsets_json(view.end)
            publishing.append(entry)
        else:
            active.append(entry)
    lag = partition_lag(committed, current, latest)
    suspended = row.suspended
    return {
        "id": supervisor_id,
        "generationTime": druid_timestamp(now),
        "payload": {
            "dataSource": spec.datasource,
            "stream": io.topic or io.topicPattern,
            "partitions": len(loop.partitions) if loop else 0,
            "replicas": io.replicas,
            "durationSeconds": int(duration.total_seconds()),
            "activeTasks": active,
            "publishingTasks": publishing,
            "latestOffsets": offsets_json(latest),
            "committedOffsets": offsets_json(committed),
            "minimumLag": offsets_json(lag),
            "aggregateLag": sum(lag.values()),
            "offsetsLastUpdated": loop.offsets_updated if loop else None,
            "suspended": suspended,
            **states(loop, suspended),
            "recentErrors": [e.to_json() for e in loop.recent_errors] if loop else [],
            "warnings": spec_warnings(spec),
            **_autoscaler(session, spec, supervisor_id),
        },
    }


def _autoscaler(session: Session, spec: SupervisorSpec, supervisor_id: str) -> dict[str, Any]:
    """The lag-based autoscaler's task count and its decisions (newest last), when it is on."""
    config = spec.spec.ioConfig.autoScalerConfig
    if config is None or not config.enableTaskAutoScaler:
        return {}
    row = AutoscalerRepository(session).get(supervisor_id)
    scaled = row.task_count if row is not None else None
    return {
        "autoscaler": {
            "taskCount": effective_task_count(spec, scaled),
            "taskCountMin": config.taskCountMin,
            "taskCountMax": config.taskCountMax,
            "decisions": list(row.decisions.get("decisions", [])) if row is not None else [],
        }
    }


def spec_warnings(spec: SupervisorSpec) -> list[str]:
    """What of the spec works, but not as written (a legacy parser read as an inputFormat)."""
    schema, io = spec.spec.dataSchema, spec.spec.ioConfig
    if schema.parser is None:
        return []
    given = io.inputFormat.to_json() if io.inputFormat is not None else None
    return [legacy_parser.warning(schema.parser, given)]


def _ask_running_tasks(
    session: Session, now: datetime, supervisor_id: str, ask: Callable[[TaskApiClient], T]
) -> list[tuple[TaskRow, T]]:
    """`ask` every running task of the supervisor; tasks that do not answer are left out (as
    Druid does). 404 for an unknown supervisor."""
    if SpecRepository(session).active(supervisor_id) is None:
        raise NotFoundError(f"[{supervisor_id}] does not exist")
    answers = []
    for row in TaskRepository(session).of_supervisor(supervisor_id, now):
        if not reachable(row):
            continue
        try:
            client = TaskApiClient.for_task(row, timeout=5.0)
            answers.append((row, ask(client)))
        except TaskApiError:
            continue
    return answers


def stats_report(session: Session, now: datetime, supervisor_id: str) -> dict[str, object]:
    """Druid's supervisor stats: the row counts of each running task (their moving averages
    and totals), by task group."""
    report: dict[str, dict[str, object]] = {}
    for row, stats in _ask_running_tasks(session, now, supervisor_id, TaskApiClient.row_stats):
        report.setdefault(str(row.group_id), {})[row.id] = stats
    return dict(report)


def parse_errors(session: Session, now: datetime, supervisor_id: str) -> list[dict[str, object]]:
    """Druid's supervisor parseErrors: the sampled unparseable records of running tasks."""
    return [
        {
            "taskId": row.id,
            "input": sample.get("input"),
            "errorType": "unparseable",
            "details": [sample.get("message")],
            "partition": sample.get("partition"),
            "offset": sample.get("offset"),
        }
        for row, events in _ask_running_tasks(
            session, now, supervisor_id, TaskApiClient.unparseable_events
        )
        for sample in events
    ]


def summary(
    status: Callable[[str], SupervisorStatus | None],
    row: SupervisorSpecRow,
    *,
    spec: bool,
    system: bool,
) -> dict[str, Any]:
    """Druid's supervisor summary of a list (?full, ?system): its state, and with `spec` its
    spec, with `system` its type, source and spec as text (secrets masked)."""
    entry: dict[str, Any] = {
        "id": row.supervisor_id,
        **states(status(row.supervisor_id), row.suspended),
        "dataSource": row.datasource,
        "suspended": row.suspended,
    }
    if not spec and not system:
        return entry
    masked = mask_spec(row.payload)
    if spec:
        entry["spec"] = druid_form(masked)
    if system:
        entry["type"] = row.payload.get("type", "kafka")
        entry["source"] = masked["spec"]["ioConfig"].get("topic") or masked["spec"]["ioConfig"].get(
            "topicPattern"
        )
        entry["specString"] = json.dumps(masked, separators=(",", ":"))
    return entry
