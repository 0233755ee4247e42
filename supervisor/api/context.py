"""What the routes reach of the running service, typed: one AppContext on the app's state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from fastapi import Request
from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.controller.manager import SupervisorManager
from supervisor.lake.tables import Lake
from supervisor.lru import Lru
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import StatusStore, SupervisorStatus
from supervisor.runner.protocol import Runner
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.services import lookups
from supervisor.services.authentication import Authenticator
from supervisor.services.leadership import Leadership
from supervisor.services.metrics import Metrics
from supervisor.services.sql_held import HeldFiles
from supervisor.services.task_life import Unsettled
from supervisor.settings import Settings
from supervisor.sql.engine import SqlEngine

OWNERS_KEPT = 100_000
OWNERS_S = 5.0


@dataclass
class AppContext:
    settings: Settings
    clock: Clock
    runner: Runner
    metrics: Metrics = field(default_factory=Metrics)
    statuses: StatusStore = field(default_factory=StatusStore)
    # launches this overlord began and could not see through, for its task monitor
    unsettled: Unsettled = field(default_factory=Unsettled)
    # set when the service has started (its lifespan): the metadata DB and the supervisors
    started_sessions: Callable[[], Session] | None = None
    manager: SupervisorManager | None = None  # while this overlord leads
    leadership: Leadership | None = None  # its hold on the lease, once taken
    shared: bool = False  # a metadata DB other overlords share (not SQLite): statuses in it
    authenticator: Authenticator | None = None  # with authentication on, once started
    lake: Lake | None = None  # the datasources' Iceberg tables, once started
    sql_engine: SqlEngine | None = None  # the SQL API's DuckDB, from its first query
    held_files: HeldFiles | None = None  # the held rows' files it keeps read, from then
    # the datasources a supervisor has had, and a task's, for the routes' permission checks
    # (a supervisor's kept OWNERS_S, dropped when it is submitted here; a task's never change)
    owners: Lru[str, tuple[tuple[str, ...], float]] = field(
        default_factory=lambda: Lru(OWNERS_KEPT)
    )

    @property
    def kafka_access(self) -> KafkaAccess:
        """What specs' consumerProperties may make the service do (the operator's leave)."""
        return KafkaAccess.of(self.settings)

    @property
    def sessions(self) -> Callable[[], Session]:
        if self.started_sessions is None:
            raise RuntimeError("the service has not started: no metadata DB yet")
        return self.started_sessions

    @property
    def tables(self) -> Lake:
        """The datasources' Iceberg tables (what is published)."""
        if self.lake is None:
            raise RuntimeError("the service has not started: no tables yet")
        return self.lake

    @property
    def supervisors(self) -> SupervisorManager | None:
        """The supervisors' manager when they run here (not on a follower, nor in tests of
        the spec API alone)."""
        return self.manager if self.settings.run_supervisors else None

    @property
    def fence(self) -> Fence:
        """What every act of this overlord checks: its lease (none: unfenced)."""
        return UNFENCED if self.leadership is None else self.leadership

    @property
    def leading(self) -> bool:
        """Whether this overlord leads (holds the lease); one with no lease at all does."""
        return self.leadership is None or self.leadership.leading

    def leader_url(self) -> str | None:
        """The leader's URL (this overlord's own while it leads); None while none leads."""
        if self.leadership is None:
            return self.settings.advertised_url()
        return self.leadership.leader_url()

    def status(self, session: Session, supervisor_id: str) -> SupervisorStatus | None:
        """The supervisor's status from its last pass; None before one (or with no passes).
        A follower reads what the leader last wrote of it to the shared metadata DB, on the
        caller's session."""
        if self.leading or not self.shared:
            return self.statuses.get(supervisor_id)
        raw = lookups.written_status(session, supervisor_id)
        return None if raw is None else SupervisorStatus.from_json(raw)

    def statuses_of(self, session: Session) -> Callable[[str], SupervisorStatus | None]:
        """Every supervisor's status, for a listing: on a follower, read in one query."""
        if self.leading or not self.shared:
            return self.statuses.get
        raw = lookups.written_statuses(session)
        return lambda supervisor_id: (
            SupervisorStatus.from_json(raw[supervisor_id]) if supervisor_id in raw else None
        )


def context(request: Request) -> AppContext:
    return cast(AppContext, request.app.state.context)
