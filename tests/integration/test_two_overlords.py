"""Two overlords on one PostgreSQL metadata DB, real Kafka and Spark tasks: one leads, the other
follows (answers reads from the DB, redirects writes, which the CLI follows), and takes over
when the leader stops, adopting its task, which then publishes to the new leader: every record
once."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from supervisor.cli import main
from supervisor.db.models import CommittedOffsetsRow, IntentRow, SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.settings import Settings
from supervisor.testkit.service import RunningService, db_rows, task_settings
from supervisor.testkit.waits import wait_for
from tests.conftest import produce_words, words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"
SID = "shared"


def settings_for(url: str, tmp_path: Path, jar_cache: Path) -> Settings:
    # one work directory, one task host: both overlords see its processes
    return task_settings(tmp_path, jar_cache, metadata_url=url, lease_s=3.0)


def rows_published(service: RunningService) -> int:
    return int(db_rows(service, select(func.coalesce(func.sum(SegmentRow.num_rows), 0)))[0][0])


def test_a_follower_redirects_writes_serves_reads_and_takes_over(
    kafka: LocalKafka,
    postgres: LocalPostgres,
    jar_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = postgres.create_database(f"ha{uuid.uuid4().hex[:8]}")
    topic = words_topic(kafka, "ha", 10)
    spec = words_spec(SID, topic, kafka.bootstrap_servers)
    first = RunningService(settings_for(url, tmp_path, jar_cache))
    first.settings.port = first.port
    second = RunningService(settings_for(url, tmp_path, jar_cache))
    second.settings.port = second.port
    with first, second, httpx.Client(timeout=30) as http:
        # one leads, the other follows, and both say which (Druid's answers)
        assert http.get(f"{first.url}/druid/indexer/v1/isLeader").json() == {"leader": True}
        follower = http.get(f"{second.url}/druid/indexer/v1/isLeader")
        assert (follower.status_code, follower.json()) == (404, {"leader": False})
        for service in (first, second):
            assert http.get(f"{service.url}/druid/indexer/v1/leader").text == first.url

        # a write to the follower: 307 to the same path on the leader, and it takes effect
        redirected = http.post(f"{second.url}{BASE}?skipRestartIfUnmodified=false", json=spec)
        assert redirected.status_code == 307
        assert redirected.headers["location"] == f"{first.url}{BASE}?skipRestartIfUnmodified=false"
        followed = http.post(f"{second.url}{BASE}", json=spec, follow_redirects=True)
        assert followed.json() == {"id": SID}
        (task,) = wait_for(
            lambda: db_rows(first, select(TaskRow.id).where(TaskRow.location_port.is_not(None))),
            180,
            "the task",
        )
        reading = wait_for(
            lambda: (
                (s := http.get(f"{second.url}{BASE}/{SID}/status").json()["payload"])["activeTasks"]
                and s["activeTasks"][0]["currentOffsets"] == {"0": 10}
                and s
            ),
            180,
            "the follower to show the task reading all 10 (the leader's status, from the DB)",
        )
        assert (reading["state"], reading["healthy"], reading["latestOffsets"]) == (
            "RUNNING",
            True,
            {"0": 10},
        )
        assert http.get(f"{second.url}{BASE}/{SID}/health").json() == {"healthy": True}

        # the CLI, pointed at the follower, follows the redirect: a handoff the leader does
        assert main(["supervisor", "--url", second.url, "handoff", SID, "0"]) == 0
        assert "handoff of task group(s) 0 requested" in capsys.readouterr().out
        wait_for(lambda: rows_published(first) == 10, 180, "the handoff to publish 10 rows")
        wait_for(
            lambda: (
                db_rows(first, select(IntentRow.kind, IntentRow.outcome))
                == [("handoff", "rolled over")]
            ),
            30,
            "the handoff intent to be done",
        )
        successor = wait_for(
            lambda: db_rows(
                first,
                select(TaskRow.id).where(
                    TaskRow.id != task[0],
                    TaskRow.status == "RUNNING",
                    TaskRow.location_port.is_not(None),
                ),
            ),
            180,
            "a successor",
        )[0][0]

        # the leader stops; the follower takes over, adopting the running successor
        produce_words(kafka, topic, 5)
        first.__exit__()
        wait_for(
            lambda: http.get(f"{second.url}/druid/indexer/v1/isLeader").status_code == 200,
            15,
            "the follower to lead (within the lease)",
        )
        assert http.get(f"{second.url}/druid/indexer/v1/leader").text == second.url
        wait_for(
            lambda: (
                http.get(f"{second.url}{BASE}/{SID}/status").json()["payload"]["activeTasks"][0][
                    "currentOffsets"
                ]
                == {"0": 15}
            ),
            120,
            "the adopted successor to read on",
        )
        # its publish goes to the new leader (the task learned where it is)
        assert http.post(
            f"{second.url}{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}
        ).is_success
        wait_for(lambda: rows_published(second) == 15, 180, "the successor to publish")
        assert db_rows(second, select(CommittedOffsetsRow.offsets)) == [({"0": 15},)]
        done = select(TaskRow.status).where(TaskRow.id.in_([task[0], successor]))
        wait_for(
            lambda: db_rows(second, done) == [("SUCCESS",), ("SUCCESS",)],
            60,
            "both generations to end in SUCCESS (the second seen ending by the new leader)",
        )
        statuses = dict(db_rows(second, select(TaskRow.id, TaskRow.status)))
        assert "FAILED" not in statuses.values()  # adopted, none killed
        second.settings.kill_tasks_on_exit = True
