"""Task hosts as the overlords see them: registered and kept by their heartbeats, listed in
Druid's shape, enabled and disabled by an operator."""

from __future__ import annotations

import hmac
import re
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.db.models import WorkerRow
from supervisor.db.workers import WorkerRepository
from supervisor.errors import BadRequestError, ConflictError, NotFoundError, Raced
from supervisor.schemas.worker import Heartbeat

# host:port as a task host gives it: a DNS name or IPv4 address (no user info, no path)
HOST = re.compile(r"(?=.{1,255}$)[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?:[0-9]{1,5}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{32,128}")
NAME = re.compile(r"[A-Za-z0-9 ._:+-]{1,64}")


def _field(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise BadRequestError(f"{name}: must be a {kind.__name__}", field=name)
    return value


def _matching(body: dict[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    value = _field(body, name, str)
    if not pattern.fullmatch(value):
        raise BadRequestError(f"{name}: {value[:80]!r} is not valid here", field=name)
    return str(value)


def read_heartbeat(body: object) -> Heartbeat:
    """A heartbeat's body, each field checked (a 400 naming it)."""
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object")
    host = _matching(body, "host", HOST)
    if int(host.rsplit(":", 1)[1]) > 65535:
        raise BadRequestError(f"host: port of {host!r} is out of range", field="host")
    scheme = _field(body, "scheme", str)
    if scheme not in ("http", "https"):
        raise BadRequestError("scheme: http or https", field="scheme")
    capacity = _field(body, "capacity", int)
    if not 1 <= capacity <= 1024:
        raise BadRequestError("capacity: from 1 to 1024", field="capacity")
    return Heartbeat(
        host=host,
        scheme=scheme,
        ip=_matching(body, "ip", NAME),
        capacity=capacity,
        version=_matching(body, "version", NAME),
        category=_matching(body, "category", NAME),
        token=_matching(body, "token", TOKEN),
    )


class WorkerService:
    def __init__(self, session: Session, clock: Clock, timeout_s: float = 15.0) -> None:
        self.session = session
        self.clock = clock
        self.timeout = timedelta(seconds=timeout_s)  # a host silent this long is lost
        self.workers = WorkerRepository(session)

    def heartbeat(self, body: object) -> None:
        """Register a task host or renew it (every heartbeat carries all it says of itself)."""
        beat = read_heartbeat(body)
        host = beat.host
        values = beat.model_dump(exclude={"host"})
        now = self.clock()
        row = self.workers.get(host)
        if row is None:
            self.workers.add(
                WorkerRow(host=host, enabled=True, registered_at=now, heartbeat_at=now, **values)
            )
        else:
            self._same_host(row, values, now)
            for key, value in values.items():
                setattr(row, key, value)
            row.heartbeat_at = now
        try:
            self.session.commit()
        except IntegrityError:  # its first two heartbeats at once: the second renews
            self.session.rollback()
            raise Raced(f"task host {host} registered meanwhile") from None

    def _same_host(self, row: WorkerRow, values: dict[str, Any], now: Any) -> None:
        """A live host's registration is its own: another token (a second worker on the same
        address, or one claiming it), or http for a host that serves https, is refused until
        the host has been silent for the timeout (lost: a new one may take its place)."""
        if not row.heard_within(self.timeout, now):
            return
        if not hmac.compare_digest(row.token, values["token"]):
            raise ConflictError(
                f"task host {row.host} is registered and alive with another token", field="token"
            )
        if row.scheme == "https" and values["scheme"] != "https":
            raise ConflictError(f"task host {row.host} serves https", field="scheme")

    def listing(self, timeout_s: float) -> list[dict[str, Any]]:
        """Druid's GET /druid/indexer/v1/workers: the hosts heard from within the timeout."""
        now = self.clock()
        running = self.workers.running_tasks()
        completed = self.workers.last_completed()
        shown = []
        for row in self.workers.all():
            if not row.heard_within(timedelta(seconds=timeout_s), now):
                continue
            tasks = sorted(t.id for t in running.get(row.host, []))
            last = completed.get(row.host)
            shown.append(
                {
                    "worker": {
                        "scheme": row.scheme,
                        "host": row.host,
                        "ip": row.ip,
                        "capacity": row.capacity,
                        # Druid announces a disabled worker with an empty version
                        "version": row.version if row.enabled else "",
                        "category": row.category,
                    },
                    "currCapacityUsed": len(tasks),
                    "currParallelIndexCapacityUsed": 0,
                    "availabilityGroups": [],
                    "runningTasks": tasks,
                    "lastCompletedTaskTime": druid_timestamp(last) if last else None,
                    "blacklistedUntil": None,
                }
            )
        return shown

    def set_enabled(self, host: str, enabled: bool) -> dict[str, str]:
        """Druid's POST /worker/{host}/enable|disable: a disabled host gets no new tasks."""
        row = self.workers.get(host)
        if row is None:
            raise NotFoundError(f"Cannot find worker [{host}]")
        row.enabled = enabled
        self.session.commit()
        return {host: "enabled" if enabled else "disabled"}
