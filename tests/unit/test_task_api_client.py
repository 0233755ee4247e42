"""The task API client's keep-alive connections, against a real HTTP/1.1 server on loopback:
reused while fresh, never sent on when the task closed them, swept once their task is gone."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from supervisor.clients import task_api
from supervisor.clients.task_api import TaskApiClient, TaskApiError
from tasks.protocol import TOKEN_HEADER


class Task(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.connections = 0
        self.close_after_answer = False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Task

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        if self.path.endswith("/missing"):
            self._answer(404, {"error": "no such thing"})
        else:
            self._answer(200, {"path": self.path, "token": self.headers.get(TOKEN_HEADER)})
        if self.server.close_after_answer:
            self.close_connection = True  # like a server whose keep-alive ran out

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer(200, {"path": self.path, "body": body})

    def _answer(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def task() -> Iterator[Task]:
    server = Task()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def client(server: Task) -> TaskApiClient:
    return TaskApiClient("127.0.0.1", server.server_address[1], "t1", "secret", timeout=5)


def test_calls_reuse_one_connection_and_carry_the_token(task: Task) -> None:
    api = client(task)
    first = api.get("/status")
    assert first == {"path": "/druid/worker/v1/chat/t1/status", "token": "secret"}
    answer = api.call("POST", "/offsets/end", params={"finish": "true"}, json={"0": 5})
    assert answer.status_code == 200
    assert answer.json() == {
        "path": "/druid/worker/v1/chat/t1/offsets/end?finish=true",
        "body": {"0": 5},
    }
    api.get("/status")
    assert task.connections == 1


def test_errors_carry_the_status_and_the_task_s_message(task: Task) -> None:
    with pytest.raises(TaskApiError) as raised:
        client(task).get("/missing")
    assert raised.value.status_code == 404 and str(raised.value) == "no such thing"


def test_a_connection_the_task_closed_is_not_sent_on(task: Task) -> None:
    task.close_after_answer = True  # without saying so, as a server whose keep-alive ran out
    api = client(task)
    for _ in range(3):  # the next call sees the closed connection and opens a new one
        assert api.get("/status")["token"] == "secret"
        time.sleep(0.3)  # the task's FIN arrives
    assert task.connections == 3


def test_an_unreachable_task_is_an_error_without_a_status() -> None:
    server = Task()
    port = server.server_address[1]
    server.server_close()  # nothing listens there any more
    with pytest.raises(TaskApiError) as raised:
        TaskApiClient("127.0.0.1", port, "t1", "secret", timeout=2).get("/status")
    assert raised.value.status_code is None


def test_idle_connections_of_tasks_not_asked_again_are_closed(
    task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(task_api, "monotonic", lambda: clock[0])
    pool = task_api._Connections()
    monkeypatch.setattr(task_api, "_connections", pool)
    client(task).get("/status")
    address = ("127.0.0.1", task.server_address[1])
    assert pool.count == 1 and address in pool.idle
    clock[0] += task_api.IDLE_S + 1  # the task is not asked again; another one is
    other = Task()
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        client(other).get("/status")
    finally:
        other.shutdown()
        other.server_close()
    assert address not in pool.idle and pool.count == 1
