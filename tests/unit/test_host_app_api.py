"""The shared application's own API (tasks/runtime/shared.py) before its Spark has started: what it
refuses, with the status a caller can act on, and how a task's chat API is routed on its one
port. (Its tasks reading and publishing on the real stack: tests/integration/test_host_app.py.)"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from supervisor.net import free_port
from tasks.host_protocol import API
from tasks.protocol import TOKEN_HEADER
from tasks.runtime.host_api import Router, create_host_api
from tasks.runtime.shared import TaskHost, TaskLogs
from tasks.serving import ServerThread
from tests.specs import task

TOKEN = "host-secret"


def payload(task_id: str, **consumer: Any) -> dict[str, Any]:
    """A task the host accepts but cannot read for (no broker at port 1)."""
    return task(task_id, {"bootstrap.servers": "127.0.0.1:1", **consumer})


@pytest.fixture
def host(tmp_path: Path) -> Any:
    args = argparse.Namespace(
        overlord="http://127.0.0.1:1",
        tasks_dir=tmp_path / "tasks",
        deep_storage=str(tmp_path / "deep"),
        master="local[1]",
    )
    task_host = TaskHost(args, TaskLogs(logging.Formatter()))
    port = free_port()
    server = ServerThread(Router(task_host, create_host_api(task_host, TOKEN)), "127.0.0.1", port)
    server.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        yield task_host, client
    server.stop()
    for hosted in task_host.tasks.values():  # they wait for a Spark that never starts
        if hosted.run is not None:
            hosted.run.kill("the test is over")
    task_host.spark_error = "never started"
    task_host.spark_ready.set()


def test_the_runner_api_wants_its_token(host: Any) -> None:
    _, client = host
    assert client.get(f"{API}/tasks").status_code == 403
    assert client.get(f"{API}/tasks", headers={TOKEN_HEADER: "wrong"}).status_code == 403
    answer = client.get(f"{API}/tasks", headers={TOKEN_HEADER: TOKEN})
    assert answer.json() == {"spark": "STARTING", "tasks": {}}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ("not json", 400, "not JSON"),
        ("[" * 100_000 + "]" * 100_000, 400, "not JSON"),
        ([], 400, "token"),
        ({"payload": payload("t1")}, 400, "token"),
        ({"payload": {"id": "t1"}, "token": "x"}, 400, "payload"),
        ({"payload": payload("../escape"), "token": "x"}, 400, "must be 1 to 255"),
        ({"payload": payload("t1"), "token": "x", "overlord": "file:///etc"}, 400, "overlord"),
        (
            {"payload": payload("t1", **{"security.protocol": "bogus"}), "token": "x"},
            400,
            "cannot start",
        ),
    ],
)
def test_a_bad_assignment_is_refused_with_its_reason(
    host: Any, body: Any, status: int, says: str
) -> None:
    task_host, client = host
    content = body if isinstance(body, str) else None
    answer = client.post(
        f"{API}/tasks",
        headers={TOKEN_HEADER: TOKEN, "Content-Type": "application/json"},
        content=content,
        json=None if content is not None else body,
    )
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]
    assert task_host.tasks == {}


def test_tasks_are_routed_by_id_and_a_kill_fences_at_once(host: Any, tmp_path: Path) -> None:
    _, client = host
    auth = {TOKEN_HEADER: TOKEN}
    for task_id in ("t1", "t2"):
        body = {"payload": payload(task_id), "token": f"token-{task_id}"}
        assert client.post(f"{API}/tasks", headers=auth, json=body).json() == {"task": task_id}
    again = client.post(f"{API}/tasks", headers=auth, json={"payload": payload("t1"), "token": "x"})
    assert again.status_code == 409
    chat = "/druid/worker/v1/chat"
    assert client.get(f"{chat}/t1/status", headers={TOKEN_HEADER: "token-t1"}).json() == "STARTING"
    assert client.get(f"{chat}/t1/status", headers={TOKEN_HEADER: "token-t2"}).status_code == 403
    # a task not here answers as a wrong token does
    assert client.get(f"{chat}/t9/status", headers={TOKEN_HEADER: "token-t1"}).status_code == 403
    assert (tmp_path / "tasks" / "t1").is_dir()

    assert client.post(f"{API}/tasks/t1/kill", headers=auth).json() == {"killed": True}
    assert client.post(f"{API}/tasks/t1/kill", headers=auth).json() == {"killed": False}
    assert client.get(f"{chat}/t1/status", headers={TOKEN_HEADER: "token-t1"}).status_code == 403
    assert client.get(f"{chat}/t2/status", headers={TOKEN_HEADER: "token-t2"}).json() == "STARTING"
    listed = client.get(f"{API}/tasks", headers=auth).json()["tasks"]
    assert listed["t1"]["running"] is False and listed["t1"]["killed"] is True
    assert listed["t2"] == {"running": True, "exitCode": None, "killed": False}
    assert client.delete(f"{API}/tasks/t2", headers=auth).json() == {"forgotten": False}
    assert client.delete(f"{API}/tasks/t1", headers=auth).json() == {"forgotten": True}
    assert "t1" not in client.get(f"{API}/tasks", headers=auth).json()["tasks"]
