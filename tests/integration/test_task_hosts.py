"""Task hosts (`sluicegate worker`, Druid's MiddleManagers) on the real stack: two hosts
register, the replicas of a group go to different hosts, Druid's worker listing shows them,
a task's log comes from its host, and a host killed whole (the worker and its tasks) has its
tasks failed and replaced on the other host, every record published exactly once. Bad input
to `worker` is a one-line error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.net import free_port
from supervisor.testkit.hosts import kill_tasks, task_host
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks, task_settings
from supervisor.testkit.waits import wait_for
from tests.conftest import produce_words, words_spec, words_topic
from tests.integration.test_console import text_of

BASE = "/druid/indexer/v1/supervisor"
FIRST = 200
MORE = 150


@pytest.mark.kafka
@pytest.mark.spark
def test_replicas_spread_over_hosts_and_a_lost_host_is_replaced(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, browser: Any
) -> None:
    topic = words_topic(kafka, "hosts", FIRST)
    spec = words_spec("hosted", topic, kafka.bootstrap_servers)
    spec["spec"]["ioConfig"]["replicas"] = 2
    with (
        overlord_with_tasks(tmp_path, jar_cache, "local[1]", worker_timeout_s=5) as (service, api),
        task_host(service.url, tmp_path / "host-a") as (host_a, process_a),
        task_host(service.url, tmp_path / "host-b") as (host_b, _),
    ):
        listed = wait_for(lambda: _workers(api, 2), 30, "both hosts listed")
        assert {w["worker"]["host"] for w in listed} == {host_a, host_b}
        assert all(w["worker"]["capacity"] == 4 for w in listed)
        assert api.post(BASE, json=spec).status_code == 200
        wait_for(lambda: _caught_up(api, FIRST), 180, "both replicas read")
        # the overlord runs no Spark application of its own: its tasks run on the hosts
        assert not (tmp_path / "work" / "host-app" / "app.json").exists()
        placed = _placed(service)
        assert sorted(placed.values()) == sorted([host_a, host_b])  # one replica on each
        listed = api.get("/druid/indexer/v1/workers").json()
        assert {w["worker"]["host"]: w["runningTasks"] for w in listed} == {
            host: [task for task, on in placed.items() if on == host] for host in (host_a, host_b)
        }
        assert all(w["currCapacityUsed"] == 1 for w in listed)
        # the console's and the CLI's view of them
        browser.get(f"{service.url}/console/#/workers")
        wait_for(lambda: host_b in text_of(browser, "main"), 60, "the console's task hosts")
        shown = text_of(browser, "main")
        assert host_a in shown and "1 / 4" in shown and next(iter(placed)) in shown
        listing = _cli("workers", "--url", service.url, "list")
        assert host_a in listing and host_b in listing and "1/4" in listing
        log = api.get(f"/druid/indexer/v1/task/{next(iter(placed))}/log")
        assert log.status_code == 200 and "task" in log.text
        # host A dies whole: the worker and its task, without a word
        os.killpg(process_a.pid, signal.SIGKILL)
        kill_tasks(tmp_path / "host-a")
        lost = next(task for task, on in placed.items() if on == host_a)
        failed = wait_for(lambda: _status(service, lost) == "FAILED", 60, "the lost task failed")
        assert failed
        error = db_rows(service, select(TaskRow.error_msg).where(TaskRow.id == lost))[0][0]
        assert error == f"its task host {host_a} stopped heartbeating"
        # its replacement runs on host B, beside the surviving replica
        wait_for(lambda: set(_placed(service).values()) == {host_b}, 60, "replacement on B")
        wait_for(lambda: len(_placed(service)) == 2, 60, "two replicas again")
        assert [w["worker"]["host"] for w in api.get("/druid/indexer/v1/workers").json()] == [
            host_b
        ]
        produce_words(kafka, topic, MORE)
        wait_for(lambda: _caught_up(api, FIRST + MORE), 180, "the rest read")
        api.post(f"{BASE}/hosted/taskGroups/handoff", json={"taskGroupIds": [0]})
        wait_for(lambda: _rows(service) == FIRST + MORE, 240, "published")
        time.sleep(2)  # a second publish would land now; none may
        assert _rows(service) == FIRST + MORE
        assert _cli("workers", "--url", service.url, "disable", host_b).strip() == (
            f"task host {host_b} disabled"
        )
        assert api.get("/druid/indexer/v1/workers").json()[0]["worker"]["version"] == ""
        # no host takes tasks now: at a handoff the successors wait for a slot, none fails
        rolled = set(_placed(service))
        api.post(f"{BASE}/hosted/taskGroups/handoff", json={"taskGroupIds": [0]})
        wait_for(lambda: not _placed(service), 120, "the rolled-over generation ended")
        time.sleep(3)  # passes every 2 s ask for a slot
        assert not _placed(service)
        ended = db_rows(service, select(TaskRow.id, TaskRow.status).where(TaskRow.id != lost))
        assert {task for task, status in ended if status != "SUCCESS"} == set()
        assert rolled <= {task for task, _ in ended}
        _cli("workers", "--url", service.url, "enable", host_b)
        assert api.get("/druid/indexer/v1/workers").json()[0]["worker"]["version"] != ""
        wait_for(lambda: len(_placed(service)) == 2, 60, "the successors placed once it may")


@pytest.mark.kafka
@pytest.mark.spark
def test_a_restarted_overlord_adopts_the_tasks_on_a_host(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    """The overlord stops and starts again (same DB, same address): the task on the host runs
    on through it, is adopted (not failed, not replaced) and publishes exactly once."""
    topic = words_topic(kafka, "adopt", FIRST)
    spec = words_spec("hosted", topic, kafka.bootstrap_servers)
    settings = task_settings(tmp_path, jar_cache, worker_timeout_s=5)
    port = free_port()
    first = RunningService(settings, port).__enter__()
    try:
        with task_host(first.url, tmp_path / "host") as (host, _):
            with httpx.Client(base_url=first.url, timeout=30) as api:
                assert api.post(BASE, json=spec).status_code == 200
                wait_for(lambda: _caught_up(api, FIRST), 180, "the task read")
            [task] = list(_placed(first))
            assert _placed(first) == {task: host}
            first.__exit__(None, None, None)  # tasks outlive the service (kill_tasks_on_exit off)
            time.sleep(2)  # the host's heartbeats go unanswered meanwhile
            first = RunningService(
                task_settings(tmp_path, jar_cache, worker_timeout_s=5), port
            ).__enter__()
            with httpx.Client(base_url=first.url, timeout=30) as api:
                produce_words(kafka, topic, MORE)
                wait_for(lambda: _caught_up(api, FIRST + MORE), 180, "the adopted task read on")
                assert _placed(first) == {task: host}  # the same task, adopted
                api.post(f"{BASE}/hosted/taskGroups/handoff", json={"taskGroupIds": [0]})
                wait_for(lambda: _rows(first) == FIRST + MORE, 240, "published")
                # its exit comes with the host's next sync
                wait_for(lambda: _status(first, task) == "SUCCESS", 60, "the task's success")
                failed = db_rows(first, select(TaskRow.id).where(TaskRow.status == "FAILED"))
                assert failed == []
    finally:
        first.__exit__(None, None, None)


def test_a_host_given_several_overlords_beats_through_one_that_answers(
    jar_cache: Path, tmp_path: Path
) -> None:
    """`--overlord A,B`: the first is down (nothing listens there), so the host registers and
    heartbeats through the second: listed alive past the heartbeat timeout (5 s)."""
    settings = task_settings(tmp_path, jar_cache, worker_timeout_s=5)
    with RunningService(settings) as service:
        down = f"http://127.0.0.1:{free_port()}"
        with (
            task_host(f"{down},{service.url}", tmp_path / "host") as (host, _),
            httpx.Client(base_url=service.url, timeout=30) as api,
        ):
            listed = wait_for(lambda: _workers(api, 1), 30, "the host listed")
            assert listed[0]["worker"]["host"] == host
            time.sleep(6)  # only later heartbeats keep it listed
            again = _workers(api, 1)
            assert again is not None and again[0]["worker"]["host"] == host


@pytest.mark.kafka
@pytest.mark.spark
def test_a_compact_task_runs_on_a_task_host(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    """The leader's compaction runs as a `compact` task on the task host, beside the indexing
    task: the interval's files (three publishes) become one, every record in it once."""
    topic = words_topic(kafka, "hcomp", 0)
    spec = words_spec("hosted", topic, kafka.bootstrap_servers)
    spec["spec"]["tuningConfig"] = {"type": "kafka", "intermediateHandoffPeriod": "PT2S"}
    with (
        overlord_with_tasks(
            tmp_path, jar_cache, "local[1]", worker_timeout_s=5, coordinator_period_s=0.5
        ) as (service, api),
        task_host(service.url, tmp_path / "host") as (host, _),
    ):
        wait_for(lambda: _workers(api, 1), 30, "the host listed")
        assert api.post(BASE, json=spec).status_code == 200
        for batch in range(1, 4):
            produce_words(kafka, topic, 20)
            wait_for(lambda b=batch: _rows(service) == 20 * b, 240, f"batch {batch} published")
        assert _files(service) >= 3  # a file (at least) a publish
        # compaction's share of the host's slots is none, its maximum none: Druid's floor of
        # one slot still runs it
        cluster = {"compactionTaskSlotRatio": 0.0, "maxCompactionTaskSlots": 0}
        answer = api.post("/druid/coordinator/v1/config/compaction/cluster", json=cluster)
        assert answer.status_code == 200
        config = {"dataSource": "hosted", "skipOffsetFromLatest": "PT0S"}
        assert api.post("/druid/coordinator/v1/config/compaction", json=config).status_code == 200
        wait_for(lambda: _files(service) == 1, 240, "the interval's files compacted into one")
        assert _rows(service) == 60
        [(task, worker)] = db_rows(
            service,
            select(TaskRow.id, TaskRow.worker).where(TaskRow.type == "compact"),
        )
        assert worker == host
        wait_for(lambda: _status(service, task) == "SUCCESS", 60, "the compact task's success")


def test_worker_refuses_bad_input(tmp_path: Path) -> None:
    cases = [
        (["--overlord", "ftp://x"], 2, "error: --overlord 'ftp://x': an http:// or https:// URL"),
        (
            ["--overlord", "http://127.0.0.1:1,ftp://y"],
            2,
            "error: --overlord 'ftp://y': an http:// or https:// URL",
        ),
        (
            ["--overlord", f"http://127.0.0.1:{free_port()}"],
            3,
            "error: cannot register with the overlord: cannot reach the service",
        ),
        (
            ["--overlord", "http://127.0.0.1:1", "--master", f"spark://127.0.0.1:{free_port()}"],
            3,
            "error: the Spark master spark://127.0.0.1:",
        ),
        (["--overlord", "http://127.0.0.1:1", "--master", "yarn"], 2, "error: --master 'yarn'"),
    ]
    for args, code, message in cases:
        result = subprocess.run(
            [sys.executable, "-m", "supervisor.cli", "worker", *args, "--port", str(free_port())],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == code, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith(message), lines


def _cli(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout


def _workers(api: httpx.Client, count: int) -> list[dict[str, Any]] | None:
    listed = api.get("/druid/indexer/v1/workers").json()
    return listed if len(listed) == count else None


def _caught_up(api: httpx.Client, count: int) -> bool:
    payload = api.get(f"{BASE}/hosted/status").json()["payload"]
    return payload.get("latestOffsets") == {"0": count} and payload.get("aggregateLag") == 0


def _placed(service: Any) -> dict[str, str]:
    rows = db_rows(service, select(TaskRow.id, TaskRow.worker).where(TaskRow.status == "RUNNING"))
    return {task: str(host) for task, host in rows}


def _status(service: Any, task_id: str) -> str:
    return str(db_rows(service, select(TaskRow.status).where(TaskRow.id == task_id))[0][0])


def _rows(service: Any) -> int:
    return sum(r[0] for r in db_rows(service, select(SegmentRow.num_rows)))


def _files(service: Any) -> int:
    """Segments the table holds: each is one file."""
    used = db_rows(service, select(SegmentRow.id).where(SegmentRow.used.is_(True)))
    return len(used)
