"""What a task answers to rows/held (tasks/runtime/held.py), as the overlord reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class HeldRows:
    """A task's answer to rows/held: its persists' files, from `start` to `end` (its current
    offsets), in deep storage or its host's work directory (`where`: deep, local)."""

    start: dict[str, int]
    end: dict[str, int]
    files: list[str]
    where: Literal["deep", "local"]


__all__ = ["HeldRows"]
