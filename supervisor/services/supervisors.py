"""Supervisor spec management: create or update, history, suspend, resume, terminate.

The running machinery comes later; the state reported here is what is stored.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.db.intents import Checkpoint, Handoff, IntentRepository, Restart, Shutdown
from supervisor.db.models import SupervisorSpecRow
from supervisor.db.repositories import (
    AUTOSCALER,
    DECISIONS_KEPT,
    AuditRepository,
    AutoscalerRepository,
    OffsetsRepository,
    SpecRepository,
    SpecVersion,
)
from supervisor.errors import BadRequestError, ForbiddenError, NotFoundError
from supervisor.lru import CACHE_BYTES, Lru, json_weight
from supervisor.model.access import ANONYMOUS, Action, Identity, ResourceType
from supervisor.model.views import effective_task_count
from supervisor.schemas.druid_form import druid_form
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.secrets import mask_spec, restore_masked
from supervisor.schemas.spec import parse_supervisor_spec, stored_spec
from tasks.partitions import PartitionKey, parse_key, split_key, task_group
from tasks.spec.errors import FieldError, SpecError
from tasks.support import unsupported

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


def _check_update(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Druid's validateSpecUpdateTo: the stream of a supervisor never changes."""
    new_io, old_io = new["spec"]["ioConfig"], old["spec"]["ioConfig"]
    for key in ("topic", "topicPattern"):
        if (key in new_io) != (key in old_io):
            raise SpecError.single(
                "spec.ioConfig.topic",
                "cannot switch between topic and topicPattern on update; "
                "terminate the supervisor and submit a new one",
            )
        if key in new_io and new_io[key] != old_io[key]:
            raise SpecError.single(
                f"spec.ioConfig.{key}",
                f"cannot change from '{old_io[key]}' to '{new_io[key]}' on update; "
                "terminate the supervisor and submit a new one",
            )


MAX_HISTORY = 1000  # versions of one supervisor a history answer holds at most
HISTORY_BYTES = 16 * 1024 * 1024  # about what one history answer holds at most


@dataclass
class History:
    """Spec versions for an answer, newest first per supervisor, until HISTORY_BYTES: then
    `truncated` (the answer says so in a header; ask with ?count for fewer)."""

    versions: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    created: dict[str, list[datetime]] = field(default_factory=dict)  # of each version
    size: int = 0
    truncated: bool = False

    def add(self, row: SupervisorSpecRow) -> bool:
        entry = SupervisorService.version_entry(row)
        weight = json_weight(entry)  # as answered: the Druid form is about twice the stored
        if self.versions and self.size + weight > HISTORY_BYTES:
            self.truncated = True
            return False
        self.size += weight
        self.versions.setdefault(row.supervisor_id, []).append(entry)
        self.created.setdefault(row.supervisor_id, []).append(row.created_at)
        return True

    def add_decisions(self, audit: AuditRepository) -> None:
        """Beside each version, as `autoscalerDecisions` (oldest first, the newest
        DECISIONS_KEPT), the lag-based autoscaler's decisions taken while it was the current
        one; versions without any are as Druid writes them."""
        for supervisor_id, entries in self.versions.items():
            created = self.created[supervisor_id]  # newest first
            taken: dict[int, list[dict[str, Any]]] = {}
            newest = DECISIONS_KEPT * len(created)  # enough for each version's newest
            for row in audit.entries(supervisor_id, AUTOSCALER, created[-1], newest):
                index = next(i for i, at in enumerate(created) if at <= row.created_at)
                taken.setdefault(index, []).append(row.payload)
            for index, decisions in taken.items():
                entries[index]["autoscalerDecisions"] = decisions[-DECISIONS_KEPT:]
                self.size += json_weight(entries[index]["autoscalerDecisions"])


class SupervisorService:
    def __init__(self, session: Session, clock: Clock, access: KafkaAccess | None = None) -> None:
        self.session = session
        self.clock = clock
        self.access = access or KafkaAccess()  # nothing beyond the defaults
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
        checked = _checked(raw)
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
            _check_update(payload, previous.payload)
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

    @staticmethod
    def version_entry(row: SupervisorSpecRow) -> dict[str, object]:
        spec = druid_form(mask_spec(row.payload))
        return {"spec": spec, "version": druid_timestamp(row.created_at)}

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
        self._require(supervisor_id)
        OffsetsRepository(self.session).delete(supervisor_id)
        now = self.clock()
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
        offsets = _reset_offsets_body(body, stream, pattern=io.topicPattern is not None)
        repo = OffsetsRepository(self.session)
        now = self.clock()
        stored = repo.get(supervisor_id)
        if stored is None:
            repo.insert(supervisor_id, row.datasource, stream, offsets, now)
        else:
            merged = {**stored.offsets, **offsets}
            if not repo.compare_and_swap(supervisor_id, stored.version, merged, now):
                raise BadRequestError("the committed offsets changed meanwhile; try again")
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


@dataclass(frozen=True)
class _Checked:
    """A submitted spec that passed validation: its id, datasource, suspension and normalized
    payload (JSON text, with Druid's defaults and its id filled in)."""

    supervisor_id: str
    datasource: str
    suspended: bool
    payload: str


CHECKED_KEPT = 1024
_checked_specs: Lru[str, _Checked] = Lru(CHECKED_KEPT, CACHE_BYTES)


def _checked(raw: Any) -> _Checked:
    """Validate a submitted spec (every problem a 400 naming its field). Validation is a pure
    function of the body and costs milliseconds, and tools resubmit the same spec over and
    over (skipRestartIfUnmodified): bodies that passed are remembered by their canonical JSON."""
    try:
        key: str | None = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None
    hit = _checked_specs.get(key) if key is not None else None
    if hit is not None:
        return hit
    parsed = parse_supervisor_spec(raw)
    problems = unsupported(parsed.spec.dataSchema, parsed.spec.ioConfig.inputFormat, "spec.")
    scaler = parsed.spec.ioConfig.autoScalerConfig
    if (
        scaler is not None
        and scaler.enableTaskAutoScaler
        and scaler.autoScalerStrategy != "lagBased"
    ):
        # refused when submitted; a version stored before is read (and scaled) as lagBased
        problems.append(
            FieldError(
                "spec.ioConfig.autoScalerConfig.autoScalerStrategy",
                f"'{scaler.autoScalerStrategy}' is not supported yet; use lagBased",
            )
        )
    if problems:
        raise SpecError(problems)
    payload = parsed.to_json()
    payload["id"] = parsed.supervisor_id
    checked = _Checked(
        parsed.supervisor_id, parsed.datasource, parsed.suspended, json.dumps(payload)
    )
    if key is not None:
        _checked_specs.put(key, checked, len(key) + len(checked.payload))
    return checked


def _reset_offsets_body(body: Any, stream: str, pattern: bool) -> dict[str, int]:
    """Druid's body: {"type": "kafka", "partitions": {"type": "end", "stream": topic,
    "partitionOffsetMap": {"0": 100}}} (a topicPattern supervisor: its pattern, and keys
    "topic:partition"); every problem is a 400 naming its field."""
    if not isinstance(body, dict):
        raise SpecError.single("", "the body must be a JSON object")
    if body.get("type") != "kafka":
        raise SpecError.single("type", "must be 'kafka'")
    partitions = body.get("partitions")
    if not isinstance(partitions, dict):
        raise SpecError.single("partitions", "is required")
    if partitions.get("stream") != stream:
        kind = "topicPattern" if pattern else "topic"
        raise SpecError.single("partitions.stream", f"must be the supervisor's {kind} '{stream}'")
    offsets = partitions.get("partitionOffsetMap")
    if not isinstance(offsets, dict) or not offsets:
        raise SpecError.single("partitions.partitionOffsetMap", "must map partitions to offsets")
    result: dict[str, int] = {}
    for partition, offset in offsets.items():
        field = f"partitions.partitionOffsetMap.{partition}"
        reason = _partition_problem(str(partition), stream, pattern)
        if reason:
            raise SpecError.single(field, reason)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise SpecError.single(field, "offsets are non-negative integers")
        result[str(parse_key(partition))] = offset
    return result


def _partition_problem(text: str, stream: str, pattern: bool) -> str | None:
    try:
        key: PartitionKey | None = parse_key(text)
    except ValueError:
        key = None
    if not pattern:
        return None if isinstance(key, int) else "partitions are non-negative integers"
    if not isinstance(key, str):
        return "partitions of a topicPattern supervisor are named 'topic:partition'"
    topic = split_key(key, stream)[0]
    if not re.fullmatch(stream, topic):
        return f"topic '{topic}' does not match the topicPattern '{stream}'"
    return None
