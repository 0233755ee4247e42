"""Columns by name, quoted: Druid field names like `kafka.key` hold dots."""

from __future__ import annotations

from typing import Any


def col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def cols(names: list[str]) -> list[Any]:
    return [col(name) for name in names]
