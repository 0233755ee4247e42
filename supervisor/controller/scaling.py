"""The lag-based autoscaler's step in a pass: its sample, and its scale action when one is
due, recorded (fenced, audited) before the snapshot is planned with the new task count. The
decisions themselves are pure (autoscale.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.controller import autoscale
from supervisor.db.repositories import (
    AUTOSCALER,
    DECISIONS_KEPT,
    AuditRepository,
    AutoscalerRepository,
)
from supervisor.model.fence import Fence
from supervisor.model.views import Snapshot
from supervisor.schemas.spec import SupervisorSpec

log = logging.getLogger(__name__)


class Scaler:
    def __init__(self, clock: Clock, monotonic: Callable[[], float], fence: Fence) -> None:
        self.clock, self.monotonic, self.fence = clock, monotonic, fence

    def scaled(
        self, session: Session, snapshot: Snapshot, spec: SupervisorSpec, lag: autoscale.LagWindow
    ) -> Snapshot:
        """The snapshot to plan: with the new task count when the autoscaler decides one."""
        config = spec.spec.ioConfig.autoScalerConfig
        if config is None or not autoscale.enabled(config) or snapshot.suspended:
            return snapshot
        now = self.monotonic()
        if lag.started is None:  # a new leader: its last action counts from when it was
            found = AutoscalerRepository(session).get(snapshot.supervisor_id)
            if found is not None:
                ago = (self.clock() - found.updated_at).total_seconds()
                lag.last_changed = now - max(0.0, ago)
        autoscale.sample(lag, config, now, autoscale.partition_lags(snapshot))
        publishing = any(t.running and t.end is not None for t in snapshot.tasks)
        decision = autoscale.decide(
            lag, config, now, snapshot.spec.task_count, len(snapshot.partitions), publishing
        )
        if decision is None:
            return snapshot
        self._record(session, snapshot.supervisor_id, decision)
        autoscale.changed(lag, now)
        return replace(snapshot, spec=replace(snapshot.spec, task_count=decision.after))

    def _record(self, session: Session, sid: str, decision: autoscale.Decision) -> None:
        self.fence.check()  # a deposed leader decides nothing
        at = self.clock()
        entry = decision.to_json(druid_timestamp(at))
        AutoscalerRepository(session).record(sid, decision.after, entry, at, DECISIONS_KEPT)
        # every decision, for the history (the status keeps the newest)
        AuditRepository(session).add(
            sid, "supervisor", AUTOSCALER, AUTOSCALER, decision.reason, None, entry, at
        )
        session.commit()
        log.info(
            "supervisor %s: autoscaler: taskCount %d -> %d: %s",
            sid,
            decision.before,
            decision.after,
            decision.reason,
        )
