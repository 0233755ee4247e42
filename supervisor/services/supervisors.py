"""Supervisor spec management: create or update, history, suspend, resume, terminate.

The running machinery comes later; the state reported here is what is stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.intents import Checkpoint, Handoff, IntentRepository, Restart, Shutdown
from supervisor.db.models import SupervisorSpecRow
from supervisor.db.offsets import OffsetGenerations, OffsetsRepository
from supervisor.db.repositories import (
    AuditRepository,
    AutoscalerRepository,
    SpecRepository,
    SpecVersion,
)
from supervisor.errors import BadRequestError, ForbiddenError, NotFoundError, Raced
from supervisor.lake.tables import (
    SUMMARY_COMMITTED,
    SUMMARY_OPERATION,
    SUMMARY_SUPERVISOR,
    Lake,
    LakeConflict,
    published,
)
from supervisor.model.access import ANONYMOUS, Action, Identity, ResourceType
from supervisor.model.views import effective_task_count
from supervisor.schemas.druid_form import druid_form
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.secrets import mask_spec, restore_masked
from supervisor.schemas.spec import stored_spec
from supervisor.services.history import MAX_HISTORY, History
from supervisor.services.spec_input import check_spec, check_update, reset_offsets_body
from tasks.partitions import parse_key, task_group
from tasks.spec.errors import SpecError

log = logging.getLogger(__name__)
TOMBSTONE_TYPE = "NoopSupervisorSpec"


RESET_REASON = "the supervisor's offsets were reset"  # why a reset's kills ended tasks


@dataclass(frozen=True)
class Actor:
    """Who asks for a change, recorded in the audit log: the authenticated identity's name
    (with authentication off, Druid's X-Druid-Author header), the X-Druid-Comment, the
    address; and what the identity may do."""

    author: str = ""
    comment: str = ""
    remote_address: str | None = None
    identity: Identity = ANONYMOUS

    def may(self, datasource: str, action: Action) -> bool:
        return self.identity.allows(ResourceType.DATASOURCE, datasource, action)

    def require(self, datasource: str, action: Action) -> None:
        if not self.may(datasource, action):
            who = self.identity.name or "this identity"
            raise ForbiddenError(f"{who} may not {action} DATASOURCE '{datasource}'")


class SupervisorService:
    def __init__(
        self,
        session: Session,
        clock: Clock,
        access: KafkaAccess | None = None,
        lake: Lake | None = None,
    ) -> None:
        self.session = session
        self.clock = clock
        self.access = access or KafkaAccess()  # nothing beyond the defaults
        self.lake = lake  # the datasources' Iceberg tables: a reset is recorded in its table
        self.specs = SpecRepository(session)
        self.audit = AuditRepository(session)

    def _require(self, supervisor_id: str) -> SpecVersion:
        row = self.specs.active(supervisor_id)
        if row is None:
            raise NotFoundError(f"[{supervisor_id}] does not exist")
        return row

    def _append(
        self,
        action: str,
        actor: Actor,
        supervisor_id: str,
        datasource: str,
        payload: dict[str, Any],
        *,
        parent: SpecVersion | None,
        suspended: bool = False,
        tombstone: bool = False,
    ) -> SupervisorSpecRow:
        now = self.clock()
        row = self.specs.append(
            supervisor_id,
            datasource,
            payload,
            now,
            parent=0 if parent is None else parent.id,
            suspended=suspended,
            tombstone=tombstone,
        )
        self.audit.add(
            supervisor_id,
            "supervisor",
            action,
            actor.author,
            actor.comment,
            actor.remote_address,
            mask_spec(payload),
            now,
        )
        log.info("supervisor %s: %s (version %s)", supervisor_id, action, row.id)
        return row

    def submit(
        self, raw: object, actor: Actor, *, skip_if_unmodified: bool = False
    ) -> tuple[str, bool]:
        """The supervisor's id, and whether a new spec version was written."""
        checked = check_spec(raw)
        supervisor_id = checked.supervisor_id
        payload = json.loads(checked.payload)
        latest = self.specs.latest(supervisor_id)
        previous = None if latest is None or latest.tombstone else latest
        actor.require(checked.datasource, Action.WRITE)
        if latest is not None:
            actor.require(latest.datasource, Action.WRITE)
        payload = restore_masked(payload, previous.payload if previous else None)
        io = payload["spec"]["ioConfig"]
        problems = self.access.problems(io["consumerProperties"])
        problems += self.access.format_problems(io.get("inputFormat"), "spec.ioConfig.inputFormat")
        if problems:
            raise SpecError(problems)
        if previous is not None:
            check_update(payload, previous.payload)
            # unmodified as Druid reads it: a spec read back (in Druid's form) and sent again
            if skip_if_unmodified and druid_form(previous.payload) == druid_form(payload):
                return supervisor_id, False
        self._append(
            "update" if previous else "create",
            actor,
            supervisor_id,
            checked.datasource,
            payload,
            parent=latest,
            suspended=checked.suspended,
        )
        return supervisor_id, True

    def get(self, supervisor_id: str) -> dict[str, object]:
        return druid_form(mask_spec(self._require(supervisor_id).payload))

    def list_active(self) -> list[SupervisorSpecRow]:
        return self.specs.all_active()

    def history(self, supervisor_id: str, count: int | None) -> History:
        """The newest `count` versions (at most MAX_HISTORY), within HISTORY_BYTES."""
        if count is not None and count <= 0:
            raise BadRequestError("count must be greater than zero", field="count")
        history = History()
        for row in self.specs.history(supervisor_id, min(count or MAX_HISTORY, MAX_HISTORY)):
            if not history.add(row):
                break
        if not history.versions:
            raise NotFoundError(f"No history for [{supervisor_id}]")
        history.add_decisions(self.audit)
        return history

    def all_history(self, count: int | None, readable: Callable[[str], bool]) -> History:
        """Each supervisor's newest `count` versions (at most MAX_HISTORY), within
        HISTORY_BYTES in all."""
        if count is not None and count <= 0:
            raise BadRequestError("count must be greater than zero", field="count")
        history, kept = History(), min(count or MAX_HISTORY, MAX_HISTORY)
        for row in self.specs.history():
            if not readable(row.datasource):
                continue
            if len(history.versions.get(row.supervisor_id, ())) < kept and not history.add(row):
                break
        history.versions = dict(sorted(history.versions.items()))
        history.add_decisions(self.audit)
        return history

    def set_suspended(self, supervisor_id: str, suspended: bool, actor: Actor) -> dict[str, object]:
        row = self._require(supervisor_id)
        if row.suspended == suspended:
            word = "suspended" if suspended else "running"
            raise BadRequestError(f"[{supervisor_id}] is already {word}")
        payload = {**row.payload, "suspended": suspended}
        self._append(
            "suspend" if suspended else "resume",
            actor,
            supervisor_id,
            row.datasource,
            payload,
            parent=row,
            suspended=suspended,
        )
        return druid_form(mask_spec(payload))

    def set_all_suspended(self, suspended: bool, actor: Actor) -> None:
        """Every supervisor the actor may write (Druid's suspendAll and resumeAll)."""
        for row in self.specs.all_active():
            if row.suspended != suspended and actor.may(row.datasource, Action.WRITE):
                self.set_suspended(row.supervisor_id, suspended, actor)

    def terminate(self, supervisor_id: str, actor: Actor) -> None:
        row = self._require(supervisor_id)
        tombstone = {
            "type": TOMBSTONE_TYPE,
            "id": supervisor_id,
            "dataSources": [row.datasource],
            "suspended": False,
        }
        self._append(
            "terminate",
            actor,
            supervisor_id,
            row.datasource,
            tombstone,
            parent=row,
            tombstone=True,
        )

    def terminate_all(self, actor: Actor) -> None:
        """Every supervisor the actor may write (Druid's terminateAll)."""
        for row in self.specs.all_active():
            if actor.may(row.datasource, Action.WRITE):
                self.terminate(row.supervisor_id, actor)

    def reset(self, supervisor_id: str, actor: Actor) -> None:
        """Druid's hard reset: forget the committed offsets; the supervisor's next pass kills
        every task (an intent written with the change, in its transaction)."""
        row = self._require(supervisor_id)
        now = self.clock()
        OffsetsRepository(self.session).delete(supervisor_id)
        OffsetGenerations(self.session).advance(supervisor_id, now)
        self._record(row.datasource, supervisor_id, "reset", {})
        self.audit.add(
            supervisor_id,
            "supervisor",
            "reset",
            actor.author,
            actor.comment,
            actor.remote_address,
            {},
            now,
        )
        intend(self.session, supervisor_id, Restart(groups=None), actor, now)

    def request_handoff(self, supervisor_id: str, groups: list[int], actor: Actor) -> None:
        """taskGroups/handoff: one intent per group, each done when its group rolls over (or
        found with nothing reading, which Druid ignores)."""
        self._require(supervisor_id)
        now = self.clock()
        for group in sorted(set(groups)):
            intend(self.session, supervisor_id, Handoff(group=group), actor, now)

    def reset_offsets(self, supervisor_id: str, body: object, actor: Actor) -> list[int]:
        """Merge the given offsets into the committed ones; the partitions' groups restart.
        Returns the task group ids whose tasks must be killed."""
        row = self._require(supervisor_id)
        io = stored_spec(row.id, row.payload).spec.ioConfig
        stream = str(io.topic or io.topicPattern)
        offsets = reset_offsets_body(body, stream, pattern=io.topicPattern is not None)
        repo = OffsetsRepository(self.session)
        now = self.clock()
        stored = repo.get(supervisor_id)
        merged = offsets if stored is None else {**stored.offsets, **offsets}
        # offsets that move begin a generation (a range read again is named anew); the same
        # offsets again do not: a task of the group that published meanwhile and one that
        # then reads the same range stay replicas
        moved = stored is None or merged != dict(stored.offsets)
        if stored is None:
            repo.insert(supervisor_id, row.datasource, stream, offsets, now)
        elif not repo.compare_and_swap(supervisor_id, stored.version, merged, now):
            raise BadRequestError("the committed offsets changed meanwhile; try again")
        if moved:
            OffsetGenerations(self.session).advance(supervisor_id, now)
        self._record(row.datasource, supervisor_id, "resetOffsets", merged)
        self.audit.add(
            supervisor_id,
            "supervisor",
            "resetOffsets",
            actor.author,
            actor.comment,
            actor.remote_address,
            {"partitions": offsets},
            now,
        )
        scaled = AutoscalerRepository(self.session).get(supervisor_id)
        spec = stored_spec(row.id, row.payload)
        task_count = effective_task_count(spec, scaled.task_count if scaled else None)
        groups = sorted({task_group(parse_key(p), task_count) for p in offsets})
        intend(self.session, supervisor_id, Restart(groups=groups), actor, now)
        return groups

    def _record(
        self, datasource: str, supervisor_id: str, operation: str, committed: dict[str, int]
    ) -> None:
        """A reset as an empty snapshot of the datasource's table (once it has one), in this
        transaction: its summary holds the supervisor's committed offsets from now on, so the
        table's latest word on them stays the DB's. The rows already published stay (as
        Druid's segments do): records read again after a reset are in the table twice."""
        if self.lake is None or not self.lake.exists(self.session, datasource):
            return
        summary = {
            SUMMARY_SUPERVISOR: supervisor_id,
            SUMMARY_OPERATION: operation,
            SUMMARY_COMMITTED: json.dumps(committed, sort_keys=True),
        }
        try:
            self.lake.append(self.session, published(datasource, [], summary))
        except LakeConflict as exc:
            raise Raced(str(exc)) from None


def intend(
    session: Session,
    owner: str,
    intent: Handoff | Restart | Checkpoint | Shutdown,
    actor: Actor,
    now: datetime,
    task_id: str | None = None,
) -> None:
    """Write an intent for `owner`'s pass, with who asked (in the caller's transaction)."""
    IntentRepository(session).add(
        owner,
        intent,
        now,
        task_id=task_id,
        author=actor.author,
        comment=actor.comment,
        remote_address=actor.remote_address,
    )
