"""Logging for the service: every line carries the supervisor, task and task group it is
about (from the context the loop and the executor set), as text or, on request, as JSON.

    with log_context(supervisor="wiki", group=0):
        log.info("rolled over")   # ... supervisor=wiki group=0: rolled over
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIELDS = ("supervisor", "task", "group")
_context: ContextVar[dict[str, Any]] = ContextVar("sluicegate_log_context", default={})  # noqa: B039


def private_log(path: Path) -> int:
    """A descriptor appending to `path`, a file its owner only may read (made so, or narrowed
    so): what a task's Kafka client says of its settings stays its owner's."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(descriptor, 0o600)
    return descriptor


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add fields (supervisor, task, group) to every log line inside the block."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current context onto each record (fields given with `extra=` win, then the
    context, then the process's defaults: a task process is about one task throughout)."""

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.defaults = {k: v for k, v in (defaults or {}).items() if v is not None}

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in {**self.defaults, **_context.get()}.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        record.context = "".join(
            f" {key}={getattr(record, key)}" for key in FIELDS if hasattr(record, key)
        )
        return True


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(32), 127]} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def escaped(text: str) -> str:
    """A field or message with its control characters written out (\\n, \\x00): one log
    record stays one line, whatever a request put in it."""
    return text.translate(_CONTROL)


class TextFormatter(logging.Formatter):
    """One line per record: the message and the context fields escaped (a traceback, added
    after, keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escaped(record.message)
        record.context = escaped(getattr(record, "context", ""))
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({key: getattr(record, key) for key in FIELDS if hasattr(record, key)})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(
    level: str = "info", fmt: str = "text", defaults: dict[str, Any] | None = None
) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter(defaults))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            TextFormatter("%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
