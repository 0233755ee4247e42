"""The shared application's per-task logs: each task's lines also go to its own task.log."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from tasks.logs import private_log


class TaskLogs(logging.Handler):
    """Each task's lines also go to its own task.log (found by the log context's task field,
    which every thread working for a task sets)."""

    def __init__(self, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self.files: dict[str, Any] = {}
        self.files_lock = threading.Lock()

    def open(self, task_id: str, path: Path) -> None:
        with self.files_lock:
            self.files[task_id] = os.fdopen(private_log(path), "a", encoding="utf-8")

    def close_task(self, task_id: str) -> None:
        with self.files_lock:
            stream = self.files.pop(task_id, None)
        if stream is not None:
            stream.close()

    def emit(self, record: logging.LogRecord) -> None:
        task_id = getattr(record, "task", None)
        if task_id is None:
            return
        with self.files_lock:
            stream = self.files.get(str(task_id))
            if stream is None:
                return
            try:
                stream.write(self.format(record) + "\n")
                stream.flush()
            except Exception:
                self.handleError(record)
