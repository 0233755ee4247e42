"""Printing results as a table (for people) or JSON (for scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def emit_json(value: Any, default: Any = None) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=default))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for index, text in enumerate(row):
            widths[index] = max(widths[index], len(text))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(key) for key, _ in pairs)
    return "\n".join(f"{key.ljust(width)}  {_cell(value)}" for key, value in pairs)
