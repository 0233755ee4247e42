"""Log lines carry the supervisor, task and group they are about, as text or JSON."""

from __future__ import annotations

import json
import logging

from tasks.logs import ContextFilter, JsonFormatter, log_context


def record(message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("sluicegate.test", logging.INFO, __file__, 1, message, None, None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_context_nests_and_explicit_fields_win() -> None:
    context = ContextFilter(defaults={"task": "from-process"})
    with log_context(supervisor="wiki"), log_context(group=1):
        inner = record("rolled over")
        context.filter(inner)
        explicit = record("x", group=7)
        context.filter(explicit)
    outside = record("after")
    context.filter(outside)
    assert (inner.supervisor, inner.group, inner.task) == ("wiki", 1, "from-process")
    assert inner.context == " supervisor=wiki task=from-process group=1"
    assert explicit.group == 7
    assert not hasattr(outside, "supervisor") and outside.context == " task=from-process"


def test_json_lines() -> None:
    made = record("paused %s", task="t1")
    made.args = ("3 replicas",)
    ContextFilter().filter(made)
    entry = json.loads(JsonFormatter().format(made))
    assert entry["message"] == "paused 3 replicas" and entry["task"] == "t1"
    assert entry["level"] == "INFO" and entry["logger"] == "sluicegate.test"
    assert entry["time"].endswith("+00:00")
