"""The leader's placement and sync over task hosts (supervisor/runner/cluster.py), with the
hosts' API faked (httpx.MockTransport) over a real SQLite metadata DB: free capacity first,
a group's replicas apart, a full or silent cluster, exits with their reports, strays killed.
tests/integration/test_task_hosts.py runs real hosts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from supervisor.clients import worker_api
from supervisor.db.models import TaskRow, WorkerRow
from supervisor.runner.cluster import FORGOTTEN_S, ClusterRunner
from supervisor.runner.local import LocalProcessRunner
from supervisor.settings import Settings
from tests.specs import task

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class FakeHost:
    """A task host's API: assigns, lists what runs and what ended, shuts down."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running: list[str] = []
        self.exited: list[dict[str, Any]] = []
        self.shutdowns: list[str] = []
        self.fail = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.fail:
            raise httpx.ConnectError("down", request=request)
        path = request.url.path
        if path.endswith("/assignTask"):
            import json

            task_id = json.loads(request.content)["id"]
            self.running.append(task_id)
            host, port = self.name.split(":")
            answer = {"task": task_id, "host": host, "port": int(port) + 1, "scheme": "http"}
            return httpx.Response(200, json={**answer, "logPath": "l", "token": "t"})
        if path == "/druid-internal/v1/worker":
            state = {"host": self.name, "running": self.running, "exited": self.exited}
            return httpx.Response(200, json=state)
        if path.endswith("/shutdown"):
            task_id = path.split("/")[-2]
            self.shutdowns.append(task_id)
            killed = task_id in self.running
            self.running = [t for t in self.running if t != task_id]
            return httpx.Response(200, json={"task": task_id, "killed": killed})
        return httpx.Response(404, json={"error": "no"})


class Cluster:
    def __init__(self, sessions: sessionmaker[Session], tmp_path: Path, monkeypatch: Any) -> None:
        self.sessions = sessions
        self.now = NOW
        self.hosts: dict[str, FakeHost] = {}
        real = worker_api.WorkerClient

        def client(row: WorkerRow) -> Any:
            host = self.hosts[row.host]
            return real(row, transport=httpx.MockTransport(host.handle))

        monkeypatch.setattr("supervisor.runner.cluster.WorkerClient", client)
        settings = Settings(work_dir=tmp_path / "work", worker_timeout_s=10)
        local = LocalProcessRunner(settings)
        self.runner = ClusterRunner(settings, local, lambda: sessions, lambda: self.now)

    def add(self, name: str, capacity: int, seen: datetime | None = None) -> FakeHost:
        with self.sessions() as session:
            session.add(
                WorkerRow(
                    host=name,
                    scheme="http",
                    ip=name.split(":")[0],
                    capacity=capacity,
                    version="v",
                    category="c",
                    token="t" * 32,
                    enabled=True,
                    registered_at=NOW,
                    heartbeat_at=seen or NOW,
                )
            )
            session.commit()
        self.hosts[name] = FakeHost(name)
        return self.hosts[name]

    def launch(self, task_id: str, group: int = 0, supervisor: str = "s") -> str | None:
        """Record the task as the TaskService does, launch it, record where it went."""
        payload = task(task_id, {"bootstrap.servers": "b:9"})
        payload["supervisorId"] = supervisor
        payload["ioConfig"]["taskGroupId"] = group
        from tasks.protocol import IndexKafkaTask

        parsed = IndexKafkaTask.model_validate(payload)
        with self.sessions() as session:
            row = TaskRow(
                id=task_id,
                type="index_kafka",
                supervisor_id=supervisor,
                datasource="d",
                group_id=group,
                payload=payload,
                status="RUNNING",
                created_at=NOW,
                updated_at=NOW,
            )
            session.add(row)
            session.commit()
            launched = self.runner.launch(parsed)
            row.worker = launched.worker
            session.commit()
        return launched.worker

    def status(self, task_id: str, status: str) -> None:
        with self.sessions() as session:
            row = session.get(TaskRow, task_id)
            assert row is not None
            row.status = status
            session.commit()


@pytest.fixture
def cluster(sessions: sessionmaker[Session], tmp_path: Path, monkeypatch: Any) -> Cluster:
    return Cluster(sessions, tmp_path, monkeypatch)


def test_most_free_capacity_first_and_replicas_apart(cluster: Cluster) -> None:
    cluster.add("a:1", 3)
    cluster.add("b:1", 2)
    assert cluster.launch("g0-r1", group=0) == "a:1"  # 3 free against 2
    assert cluster.launch("g0-r2", group=0) == "b:1"  # a has a replica of group 0
    assert cluster.launch("g1-r1", group=1) == "a:1"  # 2 free against 1
    assert cluster.launch("g1-r2", group=1) == "b:1"
    # both hosts hold group 0 and 1 now; a third replica shares the freer host
    assert cluster.launch("g0-r3", group=0) == "a:1"
    with pytest.raises(OSError, match="no task host has free capacity"):
        cluster.launch("g2-r1", group=2)


def test_no_host_runs_tasks_here_and_silent_hosts_are_not_used(cluster: Cluster) -> None:
    assert cluster.runner.uses_hosts() is False
    cluster.add("old:1", 4, seen=NOW - timedelta(seconds=60))  # silent past the timeout
    with pytest.raises(OSError, match="no task host is alive"):
        cluster.launch("t1")
    cluster.add("new:1", 1)
    assert cluster.launch("t2") == "new:1"


def test_exits_come_with_their_reports_and_a_silent_host_fails_its_tasks(
    cluster: Cluster,
) -> None:
    a, b = cluster.add("a:1", 4), cluster.add("b:1", 4)
    cluster.launch("t-a", group=0)
    cluster.launch("t-b", group=0)
    cluster.runner.synced = 0
    assert cluster.runner.exited() == []
    assert cluster.runner.is_running("t-a") and cluster.runner.is_running("t-b")
    report = {"id": "t-a", "status": "SUCCESS", "segments": [], "rowStats": {}}
    a.running, a.exited = [], [{"task": "t-a", "exitCode": 0, "report": report}]
    cluster.runner.synced = 0
    [ended] = cluster.runner.exited()
    assert (ended.task_id, ended.exit_code, ended.reason) == ("t-a", 0, None)
    assert ended.report is not None and ended.report.status.value == "SUCCESS"
    assert not cluster.runner.is_running("t-a")
    # host b falls silent past the timeout: its task fails, named so
    cluster.now = NOW + timedelta(seconds=11)
    b.fail = True
    cluster.runner.synced = 0
    [lost] = cluster.runner.exited()
    assert (lost.task_id, lost.report, lost.reason) == (
        "t-b",
        None,
        "its task host b:1 stopped heartbeating",
    )
    assert cluster.runner.exited() == []  # reported once


def test_a_returning_host_has_what_no_longer_counts_as_running_killed(cluster: Cluster) -> None:
    a = cluster.add("a:1", 4)
    cluster.launch("zombie")
    cluster.launch("alive")
    cluster.status("zombie", "FAILED")  # failed while its host was silent
    cluster.runner.placed.pop("zombie")  # (as after the host was lost)
    a.running.append("stranger")  # not in the metadata DB at all
    cluster.runner.synced = 0
    cluster.runner.exited()
    assert sorted(a.shutdowns) == ["stranger", "zombie"]
    assert a.running == ["alive"]


def test_a_killed_task_is_never_reported_as_exited(cluster: Cluster) -> None:
    a = cluster.add("a:1", 4)
    cluster.launch("t1")
    assert cluster.runner.kill("t1") is True
    assert a.shutdowns == ["t1"]
    a.exited = [{"task": "t1", "exitCode": -9, "report": None}]
    cluster.runner.synced = 0
    assert cluster.runner.exited() == []


def test_a_host_that_does_not_answer_keeps_its_tasks_running_until_it_is_lost(
    cluster: Cluster,
) -> None:
    a = cluster.add("a:1", 4)
    cluster.launch("before")
    cluster.runner.synced = 0
    cluster.runner.exited()  # a good sync: "before" runs
    cluster.launch("after")  # launched after the last good sync
    a.fail = True
    cluster.runner.synced = 0
    assert cluster.runner.exited() == []  # the sync failed: nothing is concluded
    assert cluster.runner.is_running("before") and cluster.runner.is_running("after")


def test_a_new_leader_adopts_without_calling_the_host(cluster: Cluster) -> None:
    a = cluster.add("a:1", 4)
    cluster.launch("t1")
    cluster.add("gone:1", 4, seen=NOW - timedelta(seconds=30))
    cluster.hosts["gone:1"].running.append("t2")
    with cluster.sessions() as session:
        row = session.get(TaskRow, "t1")
        assert row is not None
        session.add(
            TaskRow(
                id="t2",
                type="index_kafka",
                supervisor_id="s",
                datasource="d",
                group_id=1,
                payload=row.payload,
                status="RUNNING",
                created_at=NOW,
                updated_at=NOW,
                worker="gone:1",
            )
        )
        session.commit()
    successor = ClusterRunner(
        Settings(worker_timeout_s=10), cluster.runner.local, lambda: cluster.sessions, lambda: NOW
    )
    a.fail = True  # no call may be needed
    assert successor.adopt("t1") is True
    assert successor.is_running("t1")
    assert successor.adopt("t2") is False  # its host is lost
    assert successor.report("t2") is None


def test_an_assignment_without_an_answer_is_shut_down_and_tried_elsewhere(
    cluster: Cluster,
) -> None:
    a, b = cluster.add("a:1", 4), cluster.add("b:1", 3)
    original = a.handle

    def started_but_silent(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/assignTask"):
            original(request)  # it starts the task, then the answer is lost
            raise httpx.ReadTimeout("no answer", request=request)
        return original(request)

    a.handle = started_but_silent  # type: ignore[method-assign]
    assert cluster.launch("t1") == "b:1"
    assert a.shutdowns == ["t1"] and a.running == []
    assert b.running == ["t1"]


def test_a_live_hosts_registration_is_its_own(sessions: sessionmaker[Session]) -> None:
    from supervisor.errors import BadRequestError, ConflictError
    from supervisor.services.workers import WorkerService

    beat = {
        "host": "a:1",
        "scheme": "https",
        "ip": "a",
        "capacity": 2,
        "version": "v",
        "category": "c",
        "token": "t" * 32,
    }
    clock = [NOW]
    with sessions() as session:
        service = WorkerService(session, lambda: clock[0], timeout_s=10)
        service.heartbeat(beat)
        service.heartbeat(beat)  # the same host again: renewed
        with pytest.raises(ConflictError, match="alive with another token"):
            service.heartbeat({**beat, "token": "x" * 32})
        with pytest.raises(ConflictError, match="serves https"):
            service.heartbeat({**beat, "scheme": "http"})
        for bad, field in (({"capacity": 0}, "capacity"), ({"host": "a/b:1"}, "host")):
            with pytest.raises(BadRequestError) as refused:
                service.heartbeat({**beat, **bad})
            assert refused.value.field == field
        clock[0] = NOW + timedelta(seconds=11)  # silent past the timeout: lost, replaceable
        service.heartbeat({**beat, "token": "x" * 32, "scheme": "http"})
        row = session.get(WorkerRow, "a:1")
        assert row is not None and row.token == "x" * 32 and row.scheme == "http"


def test_a_sync_during_an_assignment_does_not_take_the_task_for_gone(cluster: Cluster) -> None:
    a = cluster.add("a:1", 4)
    original = a.handle
    during: list[Any] = []

    def slow_to_start(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/assignTask"):
            # the leader's monitor syncs while the host has not started the task yet
            cluster.runner.synced = 0
            during.extend(cluster.runner.exited())
            during.append(cluster.runner.is_running("t1"))
        return original(request)

    a.handle = slow_to_start  # type: ignore[method-assign]
    assert cluster.launch("t1") == "a:1"
    assert during == [True]  # no exit, and still running
    cluster.runner.synced = 0
    assert cluster.runner.exited() == [] and cluster.runner.is_running("t1")
    assert a.shutdowns == []


def test_a_host_restarted_on_another_port_leaves_no_client_behind(cluster: Cluster) -> None:
    cluster.add("a:1", 4)
    cluster.launch("t1")
    cluster.runner.synced = 0
    cluster.runner.exited()
    assert set(cluster.runner.clients) == {"a:1"}
    # the host is killed and comes back on another port; the old row falls silent for good
    cluster.add("a:2", 4)
    cluster.hosts["a:1"].fail = True
    cluster.now = NOW + timedelta(seconds=FORGOTTEN_S + 1)
    with cluster.sessions() as session:
        row = session.get(WorkerRow, "a:2")
        assert row is not None
        row.heartbeat_at = cluster.now
        session.commit()
    cluster.runner.synced = 0
    [lost] = cluster.runner.exited()
    assert lost.task_id == "t1"
    assert set(cluster.runner.clients) == {"a:2"}
    assert set(cluster.runner.synced_at) == {"a:2"}
    assert set(cluster.runner.running) == {"a:2"}
