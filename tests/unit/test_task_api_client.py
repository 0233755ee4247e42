"""The task API client against a real HTTP/1.1 server on loopback: its keep-alive connections
reused while fresh, never sent on when the task closed them, swept once their task is gone;
answers in the protocol's shapes, and errors for any other; the transport as httpx's seam."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
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
        self.seen: list[tuple[str, str, str | None, Any]] = []  # method, path, token, body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Task

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, self.headers.get(TOKEN_HEADER), None))
        if self.path.endswith("/checkpoints"):
            self._answer(404, {"error": "no such thing"})
        elif self.path.endswith("/offsets/current"):
            self._answer(200, {"0": "not an offset"})
        else:
            self._answer(200, "READING")
        if self.server.close_after_answer:
            self.close_connection = True  # like a server whose keep-alive ran out

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append(("POST", self.path, self.headers.get(TOKEN_HEADER), body))
        self._answer(200, body)

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
    assert api.status() == "READING"
    api.set_end_offsets({"0": 5}, finish=True)
    api.status()
    assert task.seen == [
        ("GET", "/druid/worker/v1/chat/t1/status", "secret", None),
        ("POST", "/druid/worker/v1/chat/t1/offsets/end?finish=true", "secret", {"0": 5}),
        ("GET", "/druid/worker/v1/chat/t1/status", "secret", None),
    ]
    assert task.connections == 1


def test_errors_carry_the_status_and_the_task_s_message(task: Task) -> None:
    with pytest.raises(TaskApiError) as raised:
        client(task).checkpoints()
    assert raised.value.status_code == 404 and str(raised.value) == "no such thing"


def test_an_answer_out_of_the_protocol_is_an_error(task: Task) -> None:
    with pytest.raises(TaskApiError, match="does not allow") as raised:
        client(task).current_offsets()
    assert raised.value.status_code is None


def test_the_transport_is_httpx_s_seam() -> None:
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path} {request.headers[TOKEN_HEADER]}")
        if request.url.path.endswith("/pause"):
            return httpx.Response(202, json={"status": "pausing"})
        return httpx.Response(200, json={"0": 7, "1": 9})

    api = TaskApiClient("task-host", 8100, "t1", "secret", transport=httpx.MockTransport(answer))
    assert api.pause() is None  # 202: still pausing
    assert api.current_offsets() == {"0": 7, "1": 9}
    assert asked == [
        "POST /druid/worker/v1/chat/t1/pause secret",
        "GET /druid/worker/v1/chat/t1/offsets/current secret",
    ]


def test_a_connection_the_task_closed_is_not_sent_on(task: Task) -> None:
    task.close_after_answer = True  # without saying so, as a server whose keep-alive ran out
    api = client(task)
    for _ in range(3):  # the next call sees the closed connection and opens a new one
        assert api.status() == "READING"
        time.sleep(0.3)  # the task's FIN arrives
    assert task.connections == 3


def test_an_unreachable_task_is_an_error_without_a_status() -> None:
    server = Task()
    port = server.server_address[1]
    server.server_close()  # nothing listens there any more
    with pytest.raises(TaskApiError) as raised:
        TaskApiClient("127.0.0.1", port, "t1", "secret", timeout=2).status()
    assert raised.value.status_code is None


def test_idle_connections_of_tasks_not_asked_again_are_closed(
    task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(task_api, "monotonic", lambda: clock[0])
    pool = task_api._Connections()
    monkeypatch.setattr(task_api, "_connections", pool)
    client(task).status()
    address = ("http", "127.0.0.1", task.server_address[1])
    assert pool.count == 1 and address in pool.idle
    clock[0] += task_api.IDLE_S + 1  # the task is not asked again; another one is
    other = Task()
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        client(other).status()
    finally:
        other.shutdown()
        other.server_close()
    assert address not in pool.idle and pool.count == 1
