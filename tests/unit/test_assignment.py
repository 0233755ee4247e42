"""The assignment body, as a standby reads it (tasks/assignment.py): every bad body is a 400
naming what is wrong, and the standby stays free for a good one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from supervisor.net import free_port
from tasks.control import ControlServer
from tasks.protocol import TOKEN_HEADER
from tasks.standby import ASSIGN_PATH, Assignment, create_standby_app
from tests.specs import task

TOKEN = "standby-secret"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "token"),
        (b'{"payload": {}}', "token"),
        (b'{"payload": {"type": "index_kafka"}, "token": "t"}', "payload"),
    ],
)
def test_a_bad_assignment_is_a_400_and_the_standby_stays_free(body: bytes, named: str) -> None:
    assigned: list[tuple[Any, str]] = []
    assignment = Assignment()
    app = create_standby_app(TOKEN, assignment, lambda t, token: assigned.append((t, token)))
    port = free_port()
    server = ControlServer(app, "127.0.0.1", port)
    server.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        headers = {TOKEN_HEADER: TOKEN, "Content-Type": "application/json"}
        refused = client.post(ASSIGN_PATH, content=body, headers=headers)
        assert refused.status_code == 400
        assert named in refused.json()["error"]
        assert assignment.task is None and not assigned
        good = {"payload": task("t1", {"bootstrap.servers": "127.0.0.1:1"}), "token": "tok"}
        accepted = client.post(ASSIGN_PATH, json=good, headers={TOKEN_HEADER: TOKEN})
        assert accepted.status_code == 200, accepted.text
        assert assignment.task is not None and assignment.task.id == "t1"
        assert [(t.id, token) for t, token in assigned] == [("t1", "tok")]
    server.stop()


def test_the_standby_wants_the_runners_token() -> None:
    assignment = Assignment()
    port = free_port()
    server = ControlServer(
        create_standby_app(TOKEN, assignment, lambda *_: None), "127.0.0.1", port
    )
    server.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        good = {"payload": task("t1", {"bootstrap.servers": "127.0.0.1:1"}), "token": "tok"}
        for headers in ({}, {TOKEN_HEADER: "wrong"}):
            answer = client.post(ASSIGN_PATH, json=good, headers=headers)
            assert answer.status_code == 403, answer.text
            assert answer.json() == {"error": "missing or wrong token"}
        assert assignment.task is None
    server.stop()
