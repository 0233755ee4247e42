"""Druid's cluster compaction config: how many task slots compaction may take, and which
datasource goes first.

Druid gives compaction `compactionTaskSlotRatio` (0.1) of the task slots of every worker, at
most `maxCompactionTaskSlots`, and always at least one. Here the slots are those of the task
hosts heard from and enabled; with none (tasks run on the overlord's own host, whose capacity
has no bound) compaction takes `maxCompactionTaskSlots`. Its default is the operator's
SLUICEGATE_MAX_COMPACTION_TASKS (2), where Druid's is every slot: an embedded overlord must
not give compaction the whole machine.

`compactionPolicy` is Druid's one policy, `newestSegmentFirst`, with its optional
`priorityDatasource`, whose intervals are compacted before any other datasource's.
`useAutoScaleSlots` and an `engine` other than `native` are refused: there is no autoscaler
of task hosts, nor MSQ. `useSupervisors` is taken either way (both forms run here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from supervisor.model.retention import RuleError

NAME = "compaction"  # its row in dynamic_configs
DEFAULT_RATIO = 0.1
MAX_SLOTS = 2_147_483_647  # Druid's bound (an int)
_FIELDS = {
    "compactionTaskSlotRatio",
    "maxCompactionTaskSlots",
    "useAutoScaleSlots",
    "compactionPolicy",
    "engine",
    "useSupervisors",
}
_POLICY = "newestSegmentFirst"


@dataclass(frozen=True)
class ClusterCompaction:
    ratio: float = DEFAULT_RATIO
    max_slots: int | None = None  # None: the operator's SLUICEGATE_MAX_COMPACTION_TASKS
    priority: str | None = None  # compactionPolicy.priorityDatasource
    use_supervisors: bool = False


def parse_cluster(raw: object, before: ClusterCompaction | None = None) -> ClusterCompaction:
    """A cluster compaction config as POSTed; the fields it leaves out keep their values in
    `before` (Druid updates the fields given). RuleError names a wrong field."""
    if not isinstance(raw, dict):
        raise RuleError("body", "a JSON object: the cluster's compaction config")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise RuleError(unknown[0], "not a field of the cluster's compaction config")
    found = before or ClusterCompaction()
    ratio, max_slots = found.ratio, found.max_slots
    priority, use_supervisors = found.priority, found.use_supervisors
    if raw.get("compactionTaskSlotRatio") is not None:
        ratio = slot_ratio(raw["compactionTaskSlotRatio"], "compactionTaskSlotRatio")
    if raw.get("maxCompactionTaskSlots") is not None:
        max_slots = slot_count(raw["maxCompactionTaskSlots"], "maxCompactionTaskSlots")
    if raw.get("useAutoScaleSlots") not in (None, False):
        raise RuleError("useAutoScaleSlots", "no autoscaler of task hosts here: false only")
    if raw.get("engine") not in (None, "native"):
        raise RuleError("engine", "only 'native' compaction runs here")
    if raw.get("useSupervisors") is not None:
        if not isinstance(raw["useSupervisors"], bool):
            raise RuleError("useSupervisors", "true or false")
        use_supervisors = raw["useSupervisors"]
    if "compactionPolicy" in raw:
        priority = _policy(raw["compactionPolicy"])
    return ClusterCompaction(ratio, max_slots, priority, use_supervisors)


def slot_ratio(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(field, "a number from 0 to 1")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise RuleError(field, "a number from 0 to 1")
    return float(value)


def slot_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SLOTS:
        raise RuleError(field, f"a whole number from 0 to {MAX_SLOTS}")
    return value


def _policy(raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RuleError("compactionPolicy", "a JSON object with its type")
    unknown = sorted(set(raw) - {"type", "priorityDatasource"})
    if unknown:
        raise RuleError(f"compactionPolicy.{unknown[0]}", "not a field of the policy")
    if raw.get("type", _POLICY) != _POLICY:
        raise RuleError("compactionPolicy.type", f"only '{_POLICY}' is a policy here")
    priority = raw.get("priorityDatasource")
    if priority is not None and (not isinstance(priority, str) or not priority):
        raise RuleError("compactionPolicy.priorityDatasource", "a datasource's name")
    return priority


def as_dict(config: ClusterCompaction) -> dict[str, Any]:
    """What is stored (the fields set; an unset maximum stays the operator's default)."""
    stored: dict[str, Any] = {
        "compactionTaskSlotRatio": config.ratio,
        "useSupervisors": config.use_supervisors,
    }
    if config.max_slots is not None:
        stored["maxCompactionTaskSlots"] = config.max_slots
    if config.priority is not None:
        stored["compactionPolicy"] = {"type": _POLICY, "priorityDatasource": config.priority}
    return stored


def answer(config: ClusterCompaction, default_max: int) -> dict[str, Any]:
    """Druid's shape of the cluster's fields, as they apply now."""
    policy: dict[str, Any] = {"type": _POLICY}
    if config.priority is not None:
        policy["priorityDatasource"] = config.priority
    return {
        "compactionTaskSlotRatio": config.ratio,
        "maxCompactionTaskSlots": max_slots(config, default_max),
        "useAutoScaleSlots": False,
        "engine": "native",
        "compactionPolicy": policy,
        "useSupervisors": config.use_supervisors,
    }


def max_slots(config: ClusterCompaction, default_max: int) -> int:
    return default_max if config.max_slots is None else config.max_slots


def task_slots(config: ClusterCompaction, capacity: int | None, default_max: int) -> int:
    """The compact tasks that may run at once: Druid's min(capacity * ratio, max), at least
    one; `capacity` None (no task hosts: the overlord's own, unbounded) gives the max."""
    most = max_slots(config, default_max)
    if capacity is None:
        return max(1, most)
    return max(1, min(int(capacity * config.ratio), most))


def stored(raw: dict[str, Any] | None) -> ClusterCompaction:
    """The config a stored row holds (the defaults when there is none)."""
    return ClusterCompaction() if raw is None else parse_cluster(raw)
