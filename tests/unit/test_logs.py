"""Log lines carry the supervisor, task and group they are about, as text or JSON."""

from __future__ import annotations

import json
import logging
import sys

from tasks.logs import ContextFilter, JsonFormatter, TextFormatter, log_context


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


def test_text_lines_escape_what_a_request_put_in_them() -> None:
    # an id with a newline used to forge a second log line
    made = record("supervisor %s: created", supervisor="x\nFAKE y")
    made.args = ("a\n2026-01-01 INFO forged\x00",)
    ContextFilter().filter(made)
    line = TextFormatter("%(levelname)s%(context)s: %(message)s").format(made)
    assert line == "INFO supervisor=x\\nFAKE y: supervisor a\\n2026-01-01 INFO forged\\x00: created"
    try:
        raise ValueError("boom")
    except ValueError:
        failed = record("failed")
        failed.exc_info = sys.exc_info()
    ContextFilter().filter(failed)
    assert "\nTraceback" in TextFormatter("%(message)s").format(failed)  # tracebacks keep lines
