"""What the routes reach of the running service, typed: one AppContext on the app's state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from fastapi import Request

from supervisor.clock import Clock
from supervisor.controller.manager import SupervisorManager
from supervisor.db.engine import SessionFactory
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import StatusStore, SupervisorStatus
from supervisor.runner.protocol import Runner
from supervisor.services.metrics import Metrics
from supervisor.settings import Settings


@dataclass
class AppContext:
    settings: Settings
    clock: Clock
    runner: Runner
    metrics: Metrics = field(default_factory=Metrics)
    statuses: StatusStore = field(default_factory=StatusStore)
    # set when the service has started (its lifespan): the metadata DB and the supervisors
    started_sessions: SessionFactory | None = None
    manager: SupervisorManager | None = None
    leader_epoch: int | None = None  # the leader lease's epoch this overlord took
    fence: Fence = UNFENCED  # its hold on the lease (services/leadership.py), once taken

    @property
    def sessions(self) -> SessionFactory:
        if self.started_sessions is None:
            raise RuntimeError("the service has not started: no metadata DB yet")
        return self.started_sessions

    @property
    def supervisors(self) -> SupervisorManager | None:
        """The supervisors' manager when they run (not in tests of the spec API alone)."""
        return self.manager if self.settings.run_supervisors else None

    def status(self, supervisor_id: str) -> SupervisorStatus | None:
        """The supervisor's status from its last pass; None before one (or with no passes)."""
        return self.statuses.get(supervisor_id)


def context(request: Request) -> AppContext:
    return cast(AppContext, request.app.state.context)
