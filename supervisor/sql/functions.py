"""Druid SQL's functions carried over to DuckDB: the time functions (time_functions.py),
EARLIEST/LATEST and the approximate aggregations, each rewritten into DuckDB's; the standard
functions both speak pass through as sqlglot carries them. Any other function is refused
(`rewrite`), so a query can call nothing DuckDB has that Druid lacks (`read_csv`, `getenv`)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import sqlglot
from sqlglot import exp

from supervisor.sql.errors import unsupported
from supervisor.sql.time_functions import (
    WRITTEN,
    arity,
    call,
    floor_to,
    time_extract,
    time_floor,
    time_format,
    time_in_interval,
    time_parse,
    time_shift,
    timestamp_add,
    timestamp_diff,
)
from supervisor.sql.zones import Zone

# sqlglot's names of the standard functions Druid SQL has and DuckDB carries out alike
_STANDARD_NAMES = """
COUNT SUM MIN MAX AVG ABS ROUND FLOOR CEIL LOWER UPPER LENGTH CONCAT SUBSTRING TRIM
REPLACE STR_POSITION COALESCE NULLIF CAST TRY_CAST CASE IF POWER SQRT EXP LN LOG TRUNC
GREATEST LEAST REGEXP_EXTRACT REGEXP_LIKE LEFT RIGHT REVERSE PAD STDDEV STDDEV_SAMP
STDDEV_POP VARIANCE VARIANCE_POP CURRENT_TIMESTAMP CURRENT_DATE EXTRACT DATE_TRUNC
APPROX_DISTINCT APPROX_QUANTILE ANY_VALUE ROW_NUMBER RANK DENSE_RANK NTILE LAG LEAD
FIRST_VALUE LAST_VALUE SIN COS TAN ASIN ACOS ATAN ATAN2 DEGREES RADIANS SIGN
SAFE_DIVIDE ARRAY_AGG GROUP_CONCAT COUNT_IF PERCENT_RANK CUME_DIST
"""
STANDARD = frozenset(_STANDARD_NAMES.split())


def _by_time(name: str, fn: str) -> Callable[[list[exp.Expr], Zone], exp.Expr]:
    def build(args: list[exp.Expr], _: Zone) -> exp.Expr:
        arity(name, args, 1, 2)  # EARLIEST(expr[, maxBytes])
        return call(fn, args[0], exp.column("__time"))

    return build


def _by_given(name: str, fn: str) -> Callable[[list[exp.Expr], Zone], exp.Expr]:
    def build(args: list[exp.Expr], _: Zone) -> exp.Expr:
        arity(name, args, 2, 3)  # EARLIEST_BY(expr, timestamp[, maxBytes])
        return call(fn, args[0], args[1])

    return build


def _renamed(
    name: str, fn: str, least: int, most: int, keep: int | None = None
) -> Callable[[list[exp.Expr], Zone], exp.Expr]:
    """Druid's `name` as DuckDB's `fn`, with the first `keep` arguments (a sketch's size
    arguments go: DuckDB's approximations size themselves)."""

    def build(args: list[exp.Expr], _: Zone) -> exp.Expr:
        arity(name, args, least, most)
        return call(fn, *args[: keep or len(args)])

    return build


def _millis_to_timestamp(args: list[exp.Expr], _: Zone) -> exp.Expr:
    arity("MILLIS_TO_TIMESTAMP", args, 1, 1)
    return call("timezone", exp.Literal.string("UTC"), call("epoch_ms", args[0]))


def _timestamp_to_millis(args: list[exp.Expr], _: Zone) -> exp.Expr:
    arity("TIMESTAMP_TO_MILLIS", args, 1, 1)
    return call("epoch_ms", args[0])


def _contains(insensitive: bool) -> Callable[[list[exp.Expr], Zone], exp.Expr]:
    def build(args: list[exp.Expr], _: Zone) -> exp.Expr:
        arity("CONTAINS_STRING", args, 2, 2)
        if insensitive:
            return call("contains", call("lower", args[0]), call("lower", args[1]))
        return call("contains", args[0], args[1])

    return build


# Druid's functions sqlglot does not know, by name: each rewritten into DuckDB's
DRUID: dict[str, Callable[[list[exp.Expr], Zone], exp.Expr]] = {
    "TIME_FLOOR": time_floor,
    "TIME_CEIL": lambda args, session: time_floor(args, session, ceil=True),
    "TIME_SHIFT": time_shift,
    "TIME_EXTRACT": time_extract,
    "TIME_FORMAT": time_format,
    "TIME_PARSE": time_parse,
    "TIME_IN_INTERVAL": time_in_interval,
    "TIMESTAMPADD": timestamp_add,
    "MILLIS_TO_TIMESTAMP": _millis_to_timestamp,
    "TIMESTAMP_TO_MILLIS": _timestamp_to_millis,
    "EARLIEST": _by_time("EARLIEST", "arg_min"),
    "LATEST": _by_time("LATEST", "arg_max"),
    "EARLIEST_BY": _by_given("EARLIEST_BY", "arg_min"),
    "LATEST_BY": _by_given("LATEST_BY", "arg_max"),
    "APPROX_COUNT_DISTINCT_BUILTIN": _renamed(
        "APPROX_COUNT_DISTINCT_BUILTIN", "approx_count_distinct", 1, 1
    ),
    "APPROX_COUNT_DISTINCT_DS_HLL": _renamed(
        "APPROX_COUNT_DISTINCT_DS_HLL", "approx_count_distinct", 1, 3, keep=1
    ),
    "APPROX_COUNT_DISTINCT_DS_THETA": _renamed(
        "APPROX_COUNT_DISTINCT_DS_THETA", "approx_count_distinct", 1, 2, keep=1
    ),
    "APPROX_QUANTILE_DS": _renamed("APPROX_QUANTILE_DS", "approx_quantile", 2, 3, keep=2),
    "STRLEN": _renamed("STRLEN", "length", 1, 1),
    "TEXTCAT": _renamed("TEXTCAT", "concat", 2, 2),
    "BTRIM": _renamed("BTRIM", "trim", 1, 2),
    "CONTAINS_STRING": _contains(False),
    "ICONTAINS_STRING": _contains(True),
}


def supported_names() -> list[str]:
    """Every function name a query may call (for the README and the error that refuses one)."""
    return sorted(set(DRUID) | STANDARD | {"TIMESTAMPDIFF"})  # sqlglot's own node: `rewrite`


def rewrite(node: exp.Expr, session: Zone) -> exp.Expr:
    """A node with Druid's functions rewritten into DuckDB's; a function neither Druid SQL nor
    this translation knows is refused with its name."""
    if node.meta.get(WRITTEN):
        return node
    if isinstance(node, exp.Anonymous):
        name = str(node.name).upper()
        if name not in DRUID:
            raise unsupported(
                f"function {name} is not supported (see the README's list of Druid SQL functions)"
            )
        return DRUID[name](list(node.expressions), session)
    if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None:
        return floor_to(node, session)
    if isinstance(node, exp.TimestampDiff):
        return timestamp_diff(node)
    if isinstance(node, exp.Pad):
        return _bounded_pad(node)
    if isinstance(node, exp.Replace):
        return _bounded_replace(node)
    if isinstance(node, exp.Func) and _is_call(node) and node.sql_name() not in STANDARD:
        raise unsupported(f"function {node.sql_name()} is not supported")
    return node


# characters: DuckDB's memory limit does not bound a string being built (three nested
# REPLACEs of a 1,000-character text made one of 2 GB), so what would build a longer one is
# the query's error instead
MAX_BUILT = 1_000_000


def _bounded_pad(node: exp.Pad) -> exp.Expr:
    """LPAD/RPAD whose length past MAX_BUILT is the query's error, not a string of that size."""
    length = node.expression
    too_long = exp.GT(this=length.copy(), expression=exp.Literal.number(MAX_BUILT))
    refused = call("error", exp.Literal.string(f"LPAD and RPAD take lengths up to {MAX_BUILT}"))
    node.set("expression", exp.Case(ifs=[exp.If(this=too_long, true=refused)], default=length))
    node.meta[WRITTEN] = True
    return node


_REPLACE = (  # S, F and R stand for REPLACE's arguments, `sg_v` for one lambda's parameter
    "LIST_TRANSFORM([{'s': S, 'f': F, 'r': R}], LAMBDA sg_v : CASE WHEN length(sg_v.s)"
    " + (length(sg_v.s) - length(replace(sg_v.s, sg_v.f, ''))) // greatest(length(sg_v.f), 1)"
    f" * (length(sg_v.r) - length(sg_v.f)) > {MAX_BUILT} THEN"
    f" error('REPLACE would make a string longer than {MAX_BUILT} characters')"
    " ELSE replace(sg_v.s, sg_v.f, sg_v.r) END)[1]"
)


@functools.cache
def _replace_template() -> exp.Expr:
    """_REPLACE parsed, once (each REPLACE takes a copy)."""
    return sqlglot.parse_one(_REPLACE, read="duckdb")


def _bounded_replace(node: exp.Replace) -> exp.Expr:
    """REPLACE(text, find, with) whose result, were it longer than MAX_BUILT, is the query's
    error: its length is known before it is built (the text's, and the matches' count times
    what each adds). Each argument is computed once (a lambda's parameter), so nested
    REPLACEs cost what they did. The lambda's parameter has a name of the translation's own:
    DuckDB resolves a column of the query's by that name before it."""
    given = {"S": node.this, "F": node.expression, "R": node.args.get("replacement")}
    if given["R"] is None:  # REPLACE(text, find): the matches removed, nothing grows
        return node
    template = _replace_template().copy()

    def place(part: exp.Expr) -> exp.Expr:
        if isinstance(part, exp.Column) and not part.table and part.name in given:
            placed: exp.Expr = given[part.name]
            return placed
        return part

    return template.transform(place, copy=False)


def _is_call(node: exp.Expr) -> bool:
    """A function call, not an operator sqlglot also models as a Func (AND, =, +, NOT, LIKE)."""
    return isinstance(node, exp.Func) and not isinstance(
        node, (exp.Binary, exp.Unary, exp.Predicate, exp.Connector)
    )
