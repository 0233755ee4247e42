"""Druid's flattenSpec: the fields a nested record offers, by JSONPath, jq path or tree.

A spec's paths are parsed here into steps (a field name, an array index, or every element),
which the Spark pipeline reads with get_json_object. The subset taken is what Spark's JSONPath
reads: `$`, `.name`, `['name']`, `[n]`, `[*]` (and jq's `.name`, `."name"`, `.["name"]`,
`.[n]`, `.[]`); anything else (filters, `..`, functions) is refused with a 400 naming the
field. A path that finds an object or an array gives its JSON text, as a nested value does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FIELD_TYPES = ("root", "path", "jq", "tree")
WILDCARD = "*"


@dataclass(frozen=True)
class Field:
    name: str
    steps: tuple[str | int, ...]  # a name, an array index, or WILDCARD

    @property
    def json_path(self) -> str:
        """The path as Spark's get_json_object reads it."""
        parts = ["$"]
        for step in self.steps:
            if step == WILDCARD:
                parts.append("[*]")
            elif isinstance(step, int):
                parts.append(f"[{step}]")
            elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", step):
                parts.append(f".{step}")
            else:
                parts.append(f"['{step}']")
        return "".join(parts)


@dataclass(frozen=True)
class FlattenSpec:
    discover: bool  # useFieldDiscovery: the root's fields are fields too
    fields: tuple[Field, ...]


class PathError(ValueError):
    """A path outside the subset read here."""


_NAME = r"[A-Za-z_$][A-Za-z0-9_$-]*"
_JSONPATH_STEP = re.compile(
    rf"\.(?P<dot>{_NAME})|\[\s*'(?P<squoted>[^'\\]*)'\s*\]|\[\s*\"(?P<dquoted>[^\"\\]*)\"\s*\]"
    r"|\[\s*(?P<index>\d+)\s*\]|(?P<all>\[\s*\*\s*\]|\.\*)"
)
_JQ_STEP = re.compile(
    rf"\.(?P<dot>{_NAME})|\.\"(?P<dquoted>[^\"\\]*)\"|\.?\[\s*\"(?P<bquoted>[^\"\\]*)\"\s*\]"
    r"|\.?\[\s*(?P<index>\d+)\s*\]|(?P<all>\.?\[\s*\])"
)


def _steps(expr: str, pattern: re.Pattern[str], start: int) -> tuple[str | int, ...]:
    steps: list[str | int] = []
    position = start
    while position < len(expr):
        match = pattern.match(expr, position)
        if match is None:
            raise PathError(f"cannot read '{expr[position:]}' of '{expr}'")
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        if "all" in groups:
            steps.append(WILDCARD)
        elif "index" in groups:
            steps.append(int(groups["index"]))
        else:
            steps.append(next(iter(groups.values())))
        position = match.end()
    return tuple(steps)


def json_path_steps(expr: str) -> tuple[str | int, ...]:
    """A JSONPath expression (Druid's `path` fields) as steps."""
    text = expr.strip()
    if not text.startswith("$"):
        raise PathError(f"a JSONPath starts with '$': '{expr}'")
    if ".." in text:
        raise PathError(f"deep scan ('..') is not supported: '{expr}'")
    if "?(" in text or "(" in text:
        raise PathError(f"filters and functions are not supported: '{expr}'")
    return _steps(text, _JSONPATH_STEP, 1)


def jq_steps(expr: str) -> tuple[str | int, ...]:
    """A jq path (Druid's `jq` fields) as steps: `.a.b`, `.["a b"]`, `.[0]`, `.[]`."""
    text = expr.strip()
    if text == ".":
        return ()
    if not text.startswith("."):
        raise PathError(f"a jq path starts with '.': '{expr}'")
    try:
        return _steps(text, _JQ_STEP, 0)
    except PathError as exc:
        raise PathError(f"{exc} (plain jq paths only: no pipes or functions)") from None


def parse(raw: Any, path: str) -> tuple[FlattenSpec | None, list[tuple[str, str]]]:
    """A flattenSpec, or the problems with it as (field path, reason)."""
    if raw is None:
        return None, []
    if not isinstance(raw, dict):
        return None, [(path, "must be an object")]
    problems: list[tuple[str, str]] = []
    discover = raw.get("useFieldDiscovery", True)
    if not isinstance(discover, bool):
        problems.append((f"{path}.useFieldDiscovery", "must be true or false"))
    entries = raw.get("fields")
    entries = [] if entries is None else entries
    if not isinstance(entries, list):
        return None, [*problems, (f"{path}.fields", "must be a list")]
    fields: list[Field] = []
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{path}.fields[{index}]"
        if not isinstance(entry, dict):
            problems.append((where, "must be an object"))
            continue
        kind, name = entry.get("type", "root"), entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append((f"{where}.name", "is required"))
            continue
        if name in names:
            problems.append((f"{where}.name", f"'{name}' is named twice"))
            continue
        names.add(name)
        if kind not in FIELD_TYPES:
            problems.append((f"{where}.type", f"must be one of {', '.join(FIELD_TYPES)}"))
            continue
        try:
            steps = _field_steps(kind, name, entry)
        except PathError as exc:
            key = "nodes" if kind == "tree" else "expr"
            problems.append((f"{where}.{key}", str(exc)))
            continue
        fields.append(Field(name, steps))
    if problems:
        return None, problems
    return FlattenSpec(discover is not False, tuple(fields)), []


def _field_steps(kind: str, name: str, entry: dict[str, Any]) -> tuple[str | int, ...]:
    expr = entry.get("expr")
    if kind == "root":  # the root field of that name (expr, when given, names it)
        return (expr if isinstance(expr, str) and expr else name,)
    if kind == "tree":
        nodes = entry.get("nodes")
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
            raise PathError("a tree field needs its nodes: a list of field names")
        return tuple(nodes)
    if not isinstance(expr, str) or not expr.strip():
        raise PathError(f"a {kind} field needs its expr")
    return json_path_steps(expr) if kind == "path" else jq_steps(expr)


def flattened(text: Any, root: Any, spec: FlattenSpec) -> Any:
    """Spark column: the map of a JSON record's fields per the flattenSpec. `text` is the
    record's JSON text and `root` its map<string,string> of root fields (null: unparseable)."""
    from pyspark.sql import functions as F

    pairs: list[Any] = []
    for field in spec.fields:
        pairs += [F.lit(field.name), F.get_json_object(text, field.json_path)]
    chosen = F.create_map(*pairs) if pairs else None
    if spec.discover:
        fields = root if chosen is None else F.map_concat(root, chosen)
    else:
        fields = chosen if chosen is not None else F.create_map().cast("map<string,string>")
    return F.when(root.isNotNull(), fields)
