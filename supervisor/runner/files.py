"""Files of a task's work directory that hold secrets (its token; its payload, whose
consumerProperties may hold passwords): made readable by their owner only, from the start."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """`text` into `path`, mode 0600 whether the file is new or not."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
