"""The names a spec gives that become paths, ids, log fields and parts of task ids:
supervisor ids and dataSources from a safe set of characters, Kafka's rule for topics."""

from __future__ import annotations

import re

MAX_NAME = 200  # a task id adds about 40 characters to its supervisor's id; columns hold 255
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's own rule
# Names that routes take as words: /supervisor/history, /supervisor/suspendAll, ...
RESERVED = frozenset({"history", "suspendAll", "resumeAll", "terminateAll"})
TASK_FILES = "_tasks"  # deep storage's folder of tasks' persists (supervisor/services/cleanup.py)
AUTOCOMPACT_PREFIX = "autocompact__"  # of compaction supervisors' ids (supervisor/model/compaction)


def has_control_characters(text: str) -> bool:
    """Whether `text` holds C0 control characters or DEL (never in a name, a path, a query)."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def name_problem(value: str) -> str | None:
    """Why `value` cannot be a supervisor id or a dataSource (None: it can)."""
    if not value:
        return "cannot be empty"
    if len(value) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if not _NAME.fullmatch(value):
        return (
            "may hold only letters A-Z and a-z, digits, and _ . : @ + = - "
            "(and start with a letter, a digit or _)"
        )
    if value in RESERVED:
        return f"'{value}' is the name of a route; choose another"
    if value == TASK_FILES:
        return f"'{value}' is deep storage's folder of tasks' persists; choose another"
    if value.startswith(AUTOCOMPACT_PREFIX):
        return f"'{AUTOCOMPACT_PREFIX}' begins the ids of compaction supervisors; choose another"
    return None


def task_id_problem(value: str) -> str | None:
    """Why `value` cannot be a task id (a file name too: its log, its work directory)."""
    if not 0 < len(value) <= 255 or not _NAME.fullmatch(value):
        return (
            "must be 1 to 255 of letters A-Z and a-z, digits, and _ . : @ + = - "
            "(starting with a letter, a digit or _)"
        )
    return None


def topic_problem(value: str) -> str | None:
    if not _TOPIC.fullmatch(value):
        return "is not a Kafka topic name (1 to 249 of letters, digits, '.', '_' and '-')"
    return None
