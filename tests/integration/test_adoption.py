"""A restarted service adopts the tasks its predecessor left, on the real stack: a task left
paused is resumed (druid #9913), and a task given final end offsets that the predecessor never
recorded becomes a publishing generation with a successor started from its end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.testkit.service import RunningService, db_rows, task_settings
from supervisor.testkit.waits import wait_for
from tasks.protocol import TOKEN_HEADER
from tests.conftest import produce_words, words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"


def chat(row: Any) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{row.location_port}/druid/worker/v1/chat/{row.id}",
        headers={TOKEN_HEADER: row.token},
        timeout=30,
    )


def state(control: httpx.Client) -> str | None:
    try:
        return str(control.get("/status").json())
    except httpx.TransportError:
        return None  # its control server is not up yet


@pytest.mark.parametrize("runtime", ["process", "shared"])
def test_restart_resumes_paused_tasks_and_adopts_publishing_ones(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, runtime: str
) -> None:
    """With a task process, and with the task a thread of the shared application (which
    outlives the service as a task process does)."""
    topic = words_topic(kafka, "adopt", 10)
    settings = task_settings(tmp_path, jar_cache, task_runtime=runtime)
    first = RunningService(settings)
    settings.port = first.port
    with first, httpx.Client(base_url=first.url, timeout=30) as api:
        assert api.post(BASE, json=words_spec("adopted", topic, kafka.bootstrap_servers)).is_success
        (task,) = wait_for(
            lambda: db_rows(first, select(TaskRow).where(TaskRow.location_port.is_not(None))),
            120,
            "the task",
        )
        with chat(task) as control:
            wait_for(lambda: state(control) == "READING", 180, "reading")
            wait_for(lambda: control.get("/offsets/current").json() == {"0": 10}, 120, "10 read")
            assert control.post("/pause").status_code in (200, 202)
            wait_for(lambda: state(control) == "PAUSED", 60, "paused")
    # the first service is gone (its tasks live on); the second one starts on the same port
    second = RunningService(settings, port=first.port)
    with second, httpx.Client(base_url=second.url, timeout=30) as api, chat(task) as control:
        wait_for(lambda: state(control) == "READING", 60, "the task resumed")
        status = api.get(f"{BASE}/adopted/status").json()["payload"]
        assert [t["id"] for t in status["activeTasks"]] == [task.id]
        # the service dies again, after telling the task its end without writing it down
        assert control.post("/pause").status_code in (200, 202)
        wait_for(lambda: state(control) == "PAUSED", 60, "paused again")
    with chat(task) as control:
        produce_words(kafka, topic, 5)
        assert control.post("/offsets/end", params={"finish": "true"}, json={"0": 10}).is_success
    settings.kill_tasks_on_exit = True  # this time, clean up on the way out
    third = RunningService(settings, port=first.port)
    with third:
        wait_for(
            lambda: (
                db_rows(third, select(TaskRow.status).where(TaskRow.id == task.id))
                == [("SUCCESS",)]
            ),
            180,
            "the adopted task to publish",
        )
        (end,) = db_rows(third, select(TaskRow.end_offsets).where(TaskRow.id == task.id))[0]
        assert end == {"0": 10}
        successors = wait_for(
            lambda: db_rows(third, select(TaskRow.payload).where(TaskRow.id != task.id)),
            60,
            "a successor",
        )
        start = successors[0][0]["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"]
        assert start == {"0": 10}
        failed = db_rows(third, select(TaskRow.id).where(TaskRow.status == "FAILED"))
        assert failed == []
