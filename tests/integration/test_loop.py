"""The reconcile loop's states over a real metadata DB: the stream unreachable from the start
or lost later, idleness, and what a pass starts meanwhile. The runner is a fake that records
launches (no Spark here); the dead-port case uses the real Kafka client."""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from supervisor.controller.loop import SLOW_PASS_S, SupervisorLoop
from supervisor.controller.observe import StreamError, StreamReader
from supervisor.db.models import TaskRow
from supervisor.db.repositories import OffsetsRepository
from supervisor.devstack.ports import free_port
from supervisor.runner.local import Launched
from supervisor.services.supervisors import Actor, SupervisorService
from supervisor.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class ScriptedStream(StreamReader):
    """Three partitions whose latest offsets the test sets; `down` makes describe fail."""

    def __init__(self) -> None:
        self.latest = {0: 10, 1: 10, 2: 10}
        self.down = False

    def describe(
        self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
    ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
        if self.down:
            raise StreamError("cannot reach Kafka at 127.0.0.1:1: broker down")
        return (0, 1, 2), {0: 0, 1: 0, 2: 0}, dict(self.latest)


class RecordingRunner:
    def __init__(self) -> None:
        self.launched: list[str] = []
        self.settings = Settings(standby_lead_s=0)  # no standbys: launches are what is recorded

    def launch(self, task_id: str, payload: dict[str, Any]) -> Launched:
        self.launched.append(task_id)
        return Launched("127.0.0.1", free_port(), "/dev/null", "token")


def submit(sessions: sessionmaker[Session], clock: Clock, bootstrap: str, **io: Any) -> None:
    spec = {
        "type": "kafka",
        "spec": {
            "dataSchema": {
                "dataSource": "events",
                "timestampSpec": {"column": "ts"},
                "dimensionsSpec": {"dimensions": ["a"]},
                "granularitySpec": {"segmentGranularity": "HOUR"},
            },
            "ioConfig": {
                "topic": "events",
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
                **io,
            },
        },
    }
    with sessions() as session:
        SupervisorService(session, clock).submit(spec, Actor())
        session.commit()


def loop(sessions: Any, clock: Clock, stream: StreamReader, runner: Any) -> SupervisorLoop:
    return SupervisorLoop("events", sessions, clock, runner, stream)


def run(the_loop: SupervisorLoop) -> None:
    try:
        the_loop.run_once()
    except Exception as exc:  # what the loop's thread does with a failed pass
        the_loop._failed_pass(exc)


def test_stream_lost_after_a_healthy_pass_then_back(sessions: Any) -> None:
    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    the_loop = loop(sessions, clock, stream, runner)
    run(the_loop)
    assert the_loop.status.state == "RUNNING" and len(runner.launched) == 1
    stream.down = True
    for expected in ("RUNNING", "RUNNING", "UNHEALTHY_SUPERVISOR"):
        run(the_loop)
        assert the_loop.status.state == expected  # Druid's unhealthinessThreshold is 3
    assert the_loop.status.detailed_state == "LOST_CONTACT_WITH_STREAM"
    assert not the_loop.status.healthy
    assert "broker down" in the_loop.status.recent_errors[-1]["message"]
    stream.down = False
    run(the_loop)
    assert the_loop.status.state == the_loop.status.detailed_state == "RUNNING"
    assert the_loop.status.healthy and len(runner.launched) == 1  # the task is still there


def test_a_dead_broker_address_is_unable_to_connect(sessions: Any) -> None:
    clock, runner = Clock(), RecordingRunner()
    dead = f"127.0.0.1:{free_port()}"
    submit(sessions, clock, dead)
    the_loop = loop(sessions, clock, StreamReader(timeout_s=1.0), runner)
    for _ in range(3):
        run(the_loop)
    assert the_loop.status.detailed_state == "UNABLE_TO_CONNECT_TO_STREAM"
    assert the_loop.status.state == "UNHEALTHY_SUPERVISOR"
    assert dead in the_loop.status.recent_errors[-1]["message"]
    assert runner.launched == []


def test_idle_after_inactivity_starts_nothing_and_new_data_wakes_it(sessions: Any) -> None:
    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    idle = {"enabled": True, "inactiveAfterMillis": 60000}
    submit(sessions, clock, "127.0.0.1:1", idleConfig=idle)
    with sessions() as session:  # everything was read and published already
        OffsetsRepository(session).insert("events", "events", "events", stream.latest, clock())
        session.commit()
    the_loop = loop(sessions, clock, stream, runner)
    run(the_loop)  # new to this loop: not idle yet
    assert the_loop.status.state == "RUNNING" and len(runner.launched) == 1
    with sessions() as session:  # that task ends, having found nothing to read
        session.execute(update(TaskRow).values(status="SUCCESS"))
        session.commit()
    clock.now += timedelta(seconds=59)
    run(the_loop)
    assert the_loop.status.state == "RUNNING" and len(runner.launched) == 2
    with sessions() as session:
        session.execute(update(TaskRow).values(status="SUCCESS"))
        session.commit()
    clock.now += timedelta(seconds=2)
    run(the_loop)
    assert the_loop.status.state == "IDLE" and len(runner.launched) == 2
    stream.latest = {0: 11, 1: 10, 2: 10}  # new data
    run(the_loop)
    assert the_loop.status.state == "RUNNING" and len(runner.launched) == 3


def test_a_slow_pass_is_logged_with_where_its_time_went(
    sessions: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class SlowStream(ScriptedStream):
        def describe(
            self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
        ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
            time.sleep(SLOW_PASS_S)
            return super().describe(consumer_properties, stream, pattern)

    clock, runner = Clock(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    the_loop = loop(sessions, clock, SlowStream(), runner)
    with caplog.at_level(logging.WARNING, logger="supervisor.controller.loop"):
        the_loop.step()
    assert runner.launched  # the pass did its work
    [line] = [r.getMessage() for r in caplog.records if "slow pass" in r.getMessage()]
    laps = dict(re.findall(r"(\w+) (\d+\.\d+) s", line.split("(", 1)[1]))
    assert set(laps) == {"db", "kafka", "tasks", "execute"}
    assert float(laps["kafka"]) >= SLOW_PASS_S > float(laps["db"])
