"""Druid's supervisor status payload, from the metadata DB and the loop's last observation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import druid_timestamp
from supervisor.controller.observe import task_view
from supervisor.db.repositories import OffsetsRepository, SpecRepository, TaskRepository
from supervisor.errors import NotFoundError
from supervisor.schemas.periods import duration_millis
from supervisor.schemas.spec import parse_supervisor_spec
from tasks.protocol import offsets_json


def status_report(session: Session, state: Any, supervisor_id: str) -> dict[str, Any]:
    row = SpecRepository(session).active(supervisor_id)
    if row is None:
        raise NotFoundError(f"[{supervisor_id}] does not exist")
    spec = parse_supervisor_spec(row.payload)
    io = spec.spec.ioConfig
    now = state.clock()
    duration = timedelta(milliseconds=duration_millis(io.taskDuration))
    loop = state.supervisors.status(supervisor_id) if state.settings.run_supervisors else None
    committed_row = OffsetsRepository(session).get(supervisor_id)
    committed = {
        int(p): int(o) for p, o in (committed_row.offsets if committed_row else {}).items()
    }
    active, publishing = [], []
    for task in TaskRepository(session).of_supervisor(supervisor_id, now):
        view = task_view(task)
        entry = {
            "id": task.id,
            "startingOffsets": offsets_json(view.start),
            "startTime": druid_timestamp(task.created_at),
            "remainingSeconds": max(0, int((task.created_at + duration - now).total_seconds())),
            "type": "PUBLISHING" if view.end is not None else "ACTIVE",
            "taskGroupId": view.group,
        }
        if view.end is not None:
            entry["endOffsets"] = offsets_json(view.end)
            publishing.append(entry)
        else:
            active.append(entry)
    latest = loop.latest if loop else {}
    lag = {p: max(0, latest[p] - committed.get(p, 0)) for p in latest}
    suspended = row.suspended
    state_name = "SUSPENDED" if suspended else (loop.state if loop else "PENDING")
    return {
        "id": supervisor_id,
        "generationTime": druid_timestamp(now),
        "payload": {
            "dataSource": spec.datasource,
            "stream": io.topic,
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
            "healthy": loop.healthy if loop else True,
            "state": state_name,
            "detailedState": "SUSPENDED"
            if suspended
            else (loop.detailed_state if loop else "PENDING"),
            "recentErrors": list(loop.recent_errors) if loop else [],
        },
    }
