"""Druid's compaction supervisors (`"type": "autocompact"` on the supervisor API) on a running
overlord, SQLite and PostgreSQL: the supervisor is the datasource's compaction config, listed,
suspended, resumed and terminated as a streaming supervisor is, with its history; what only a
streaming supervisor does is a 400. (test_compaction.py runs one on the real stack.)"""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from supervisor.db.models import AuditRow
from supervisor.testkit.service import RunningService, db_rows
from tests.conftest import words_spec

SUP = "/druid/indexer/v1/supervisor"
COORD = "/druid/coordinator/v1"
ID = "autocompact__clicks"
CONFIG: dict[str, Any] = {
    "dataSource": "clicks",
    "skipOffsetFromLatest": "PT1H",
    "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 1000}},
}


def _field(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    return str(answer.json().get("field") or answer.json())


def test_bad_specs_are_refused_naming_the_field(api: httpx.Client) -> None:
    cases = [
        ({"type": "autocompact"}, "spec"),
        ({"type": "autocompact", "spec": {"dataSource": "clicks"}, "tuning": 1}, "tuning"),
        ({"type": "autocompact", "spec": {**CONFIG, "skipOffsetFromLatest": "1H"}}, "spec.skip"),
        ({"type": "autocompact", "spec": {"dataSource": ""}}, "spec.dataSource"),
        ({"type": "autocompact", "spec": CONFIG, "suspended": "yes"}, "suspended"),
        ({"type": "autocompact", "spec": CONFIG, "id": "other"}, "id"),
        ({"type": "autocompact", "spec": [1]}, "spec"),
    ]
    for body, field in cases:
        assert _field(api.post(SUP, json=body)).startswith(field), body
    # a streaming supervisor may not take a compaction supervisor's name
    kafka = words_spec("autocompact__x", "words", "127.0.0.1:9")
    refused = api.post(SUP, json=kafka)
    assert refused.status_code == 400 and "begins the ids of compaction" in refused.text
    assert api.get(SUP).json() == []


def test_the_supervisor_is_the_datasources_compaction_config(api: httpx.Client) -> None:
    body = {"type": "autocompact", "spec": CONFIG, "suspended": True}
    assert api.post(SUP, json=body).json() == {"id": ID}
    assert api.get(f"{COORD}/config/compaction/clicks").json() == CONFIG
    assert api.get(f"{SUP}/{ID}").json() == body
    assert api.get(SUP).json() == [ID]
    [entry] = api.get(SUP, params={"state": "true"}).json()
    assert entry == {
        "id": ID,
        "state": "SUSPENDED",
        "detailedState": "SUSPENDED",
        "healthy": True,
        "dataSource": "clicks",
        "suspended": True,
    }
    [full] = api.get(f"{SUP}?full").json()
    assert full["spec"] == body
    [system] = api.get(f"{SUP}?system").json()
    assert system["type"] == "autocompact" and system["source"] is None
    status = api.get(f"{SUP}/{ID}/status").json()
    assert status["id"] == ID and status["payload"]["scheduleStatus"] == "NOT_ENABLED"
    assert status["payload"]["state"] == "SUSPENDED"
    [snapshot] = api.get(f"{COORD}/compaction/status").json()["latestStatus"]
    assert snapshot["scheduleStatus"] == "NOT_ENABLED"

    # the config API's write keeps it suspended; resume runs it
    changed = {**CONFIG, "skipOffsetFromLatest": "P1D"}
    assert api.post(f"{COORD}/config/compaction", json=changed).status_code == 200
    assert api.get(f"{SUP}/{ID}").json() == {**body, "spec": changed}
    assert api.post(f"{SUP}/{ID}/suspend").status_code == 400  # already suspended
    assert api.post(f"{SUP}/{ID}/resume").json()["suspended"] is False
    assert api.get(f"{SUP}/{ID}/status").json()["payload"]["scheduleStatus"] == "RUNNING"
    assert api.get(f"{SUP}/{ID}/health").json() == {"healthy": True}
    assert api.get(f"{SUP}/{ID}/stats").json() == {}
    assert api.get(f"{SUP}/{ID}/parseErrors").json() == []
    for action in ("reset", "resetOffsets", "taskGroups/handoff"):
        refused = api.post(f"{SUP}/{ID}/{action}")
        assert refused.status_code == 400 and "autocompact" in refused.text, refused.text

    history = api.get(f"{SUP}/{ID}/history").json()
    assert [v["spec"]["suspended"] for v in history] == [False, True, True]
    assert history[1]["spec"]["spec"] == changed and history[2]["spec"] == body
    assert len(api.get(f"{SUP}/{ID}/history", params={"count": 1}).json()) == 1
    assert api.get(f"{SUP}/history").json()[ID] == history

    assert api.post(f"{SUP}/suspendAll").status_code == 200
    assert api.get(f"{SUP}/{ID}").json()["suspended"] is True
    assert api.post(f"{SUP}/resumeAll").status_code == 200
    assert api.get(f"{SUP}/{ID}").json()["suspended"] is False
    assert api.post(f"{SUP}/{ID}/terminate").json() == {"id": ID}
    assert api.get(f"{COORD}/config/compaction/clicks").status_code == 404
    assert api.get(f"{SUP}/{ID}").status_code == 404
    assert api.post(f"{SUP}/{ID}/resume").status_code == 404
    assert api.get(f"{SUP}/{ID}/history").json()[0]["spec"]["type"] == "NoopSupervisorSpec"
    assert api.get(SUP).json() == []

    # one made by the config API is a compaction supervisor too; terminateAll ends it
    assert api.post(f"{COORD}/config/compaction", json=CONFIG).status_code == 200
    assert api.get(SUP).json() == [ID]
    assert api.post(f"{SUP}/terminateAll").status_code == 200
    assert api.get(f"{COORD}/config/compaction").json()["compactionConfigs"] == []


def test_the_clusters_compaction_config_sets_the_task_slots_and_the_priority(
    api: httpx.Client, service: RunningService
) -> None:
    shown = api.get(f"{COORD}/config/compaction").json()
    assert shown["compactionTaskSlotRatio"] == 0.1  # Druid's default share
    assert shown["maxCompactionTaskSlots"] == 2  # the operator's SLUICEGATE_MAX_COMPACTION_TASKS
    assert shown["compactionPolicy"] == {"type": "newestSegmentFirst"}
    policy = {"type": "newestSegmentFirst", "priorityDatasource": "clicks"}
    body = {"compactionTaskSlotRatio": 0.5, "compactionPolicy": policy}
    assert api.post(f"{COORD}/config/compaction/cluster", json=body).status_code == 200
    shown = api.get(f"{COORD}/config/compaction").json()
    assert shown["compactionTaskSlotRatio"] == 0.5 and shown["maxCompactionTaskSlots"] == 2
    assert shown["compactionPolicy"] == policy
    # Druid's older route: query parameters, each optional
    assert api.post(f"{COORD}/config/compaction/taskslots", params={"max": 6}).status_code == 200
    shown = api.get(f"{COORD}/config/compaction").json()
    assert (shown["compactionTaskSlotRatio"], shown["maxCompactionTaskSlots"]) == (0.5, 6)
    assert shown["compactionPolicy"] == policy  # what was not given stayed
    refused = [
        (
            f"{COORD}/config/compaction/cluster",
            {"compactionTaskSlotRatio": 2},
            None,
            "compactionTaskSlotRatio",
        ),
        (f"{COORD}/config/compaction/cluster", {"engine": "msq"}, None, "engine"),
        (f"{COORD}/config/compaction/cluster", [1], None, "body"),
        (f"{COORD}/config/compaction/taskslots", None, {"ratio": "half"}, "ratio"),
        (f"{COORD}/config/compaction/taskslots", None, {"max": "-3"}, "max"),
    ]
    for path, body, params, field in refused:
        assert _field(api.post(path, json=body, params=params)) == field, (body, params)
    shown = api.get(f"{COORD}/config/compaction").json()
    assert (shown["compactionTaskSlotRatio"], shown["maxCompactionTaskSlots"]) == (0.5, 6)
    audited = db_rows(
        service,
        select(AuditRow.payload).where(AuditRow.audit_key == "_cluster").order_by(AuditRow.id),
    )
    assert [row[0].get("maxCompactionTaskSlots") for row in audited] == [None, 6]  # two changes
