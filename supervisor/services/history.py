"""A supervisor's spec history as Druid answers it (GET .../history): its versions, newest first,
each with the autoscaler's decisions taken under it, bounded in count and in bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from supervisor.clock import druid_timestamp
from supervisor.db.models import SupervisorSpecRow
from supervisor.db.repositories import (
    AUTOSCALER,
    DECISIONS_KEPT,
    AuditRepository,
)
from supervisor.lru import json_weight
from supervisor.schemas.druid_form import druid_form
from supervisor.schemas.secrets import mask_spec

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
        entry = version_entry(row)
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


def version_entry(row: SupervisorSpecRow) -> dict[str, object]:
    """One version as Druid's history answers it: the spec (secrets masked) and when."""
    spec = druid_form(mask_spec(row.payload))
    return {"spec": spec, "version": druid_timestamp(row.created_at)}
