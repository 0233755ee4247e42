"""Parts of a dataSchema as Druid writes them back, which both the overlord's read-back
(supervisor/schemas/druid_form.py) and the legacy parser's check of a spec sent back
(tasks/spec/legacy_parser.py) need to agree on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_DIMENSION_KEYS = frozenset({"type", "name", "multiValueHandling", "createBitmapIndex"})
_NUMERIC = frozenset({"long", "float", "double"})


def written_dimension(dimension: str | dict[str, Any]) -> dict[str, Any]:
    """A dimension in full: a name is a string dimension; Druid writes a numeric one's
    createBitmapIndex as false, whatever was given; other fields kept after these."""
    if isinstance(dimension, str):
        dimension = {"name": dimension}
    kind = dimension.get("type", "string")
    bitmap = False if kind in _NUMERIC else dimension.get("createBitmapIndex", True)
    written = {
        "type": kind,
        "name": dimension["name"],
        "multiValueHandling": str(dimension.get("multiValueHandling", "SORTED_ARRAY")).upper(),
        "createBitmapIndex": bitmap,
    }
    return {**written, **{k: v for k, v in dimension.items() if k not in _DIMENSION_KEYS}}


def derived_exclusions(column: str, metrics: Iterable[Any]) -> list[str]:
    """What Druid's DataSchema adds to a dimensionsSpec's exclusions, in its order: the
    timestamp column, `__time`, each metric's name, then each metric's input field."""
    given = [m for m in metrics if isinstance(m, dict)]
    return [
        column,
        "__time",
        *(m["name"] for m in given if isinstance(m.get("name"), str)),
        *(m["fieldName"] for m in given if isinstance(m.get("fieldName"), str)),
    ]
