"""A Druid SQL request as one DuckDB SELECT: parsed by sqlglot's Druid dialect, its leading SET
statements taken as context (as Druid's), its `?` parameters bound as typed literals, every
table it names resolved to a schema (`druid`, `sys`, `INFORMATION_SCHEMA`) and replaced by a
name the engine registers, its functions rewritten (functions.py), and its unnamed columns
named as Druid names them (EXPR$0, EXPR$1, ...).

Only a query is carried out: no DDL, DML, COPY, PRAGMA or table function gets through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from supervisor.sql.errors import invalid, unsupported
from supervisor.sql.functions import rewrite
from supervisor.sql.time_functions import WRITTEN
from supervisor.sql.zones import Zone

DRUID = "druid"
SYS = "sys"
INFORMATION_SCHEMA = "INFORMATION_SCHEMA"
SCHEMAS = {DRUID: DRUID, SYS: SYS, INFORMATION_SCHEMA.lower(): INFORMATION_SCHEMA}
TOO_DEEP = "the query is nested too deeply to translate: flatten its subqueries or expressions"
MAX_QUERY_CHARS = 256 * 1024  # a dashboard's longest IN lists; parsing costs ~7 µs a character


@dataclass(frozen=True)
class TableRef:
    schema: str  # DRUID, SYS or INFORMATION_SCHEMA
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass
class Translated:
    sql: str  # DuckDB's
    tables: dict[str, TableRef] = field(default_factory=dict)  # registered name: what it is


def statements(query: str) -> tuple[dict[str, Any], exp.Query]:
    """The SET statements' context and the one query after them."""
    if not isinstance(query, str) or not query.strip():
        raise invalid("query: an SQL string is required", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise invalid(f"query: longer than {MAX_QUERY_CHARS} characters", field="query")
    try:
        parsed = [one for one in sqlglot.parse(query, read="druid") if one is not None]
    except (ParseError, TokenError) as exc:
        raise invalid(f"SQL could not be parsed: {_first_line(exc)}") from None
    except RecursionError:
        raise invalid(TOO_DEEP) from None
    for statement in parsed:
        for node in statement.walk():
            # a comment `/* sqlglot.meta KEY */` sets a node's meta: none may pose as a call
            # the translation wrote (functions.rewrite lets those through)
            if node._meta:
                node._meta.pop(WRITTEN, None)
    if not parsed:
        raise invalid("query: no SQL statement in it", field="query")
    context: dict[str, Any] = {}
    for statement in parsed[:-1]:
        if not isinstance(statement, exp.Set):
            raise invalid("only SET statements may come before the query")
        for item in statement.expressions:
            assignment = item.this if isinstance(item, exp.SetItem) else item
            if not isinstance(assignment, exp.EQ) or not isinstance(
                assignment.expression, (exp.Literal, exp.Boolean)
            ):
                raise invalid("SET takes a context key and a literal: SET key = 'value'")
            value = assignment.expression
            key = assignment.this.name
            context[key] = value.this if isinstance(value, exp.Boolean) else _literal(value)
    last = parsed[-1]
    if not isinstance(last, exp.Query):
        kind = type(last).__name__.upper()
        raise unsupported(f"only SELECT queries are carried out here, not {kind}")
    return context, last


def _literal(value: exp.Literal) -> Any:
    if value.is_string:
        return str(value.this)
    text = str(value.this)
    return float(text) if any(c in text for c in ".eE") else int(text)


def translate(
    tree: exp.Expr, session: Zone, parameters: list[dict[str, Any]] | None = None
) -> Translated:
    """The query as DuckDB's SQL and the tables it reads."""
    try:
        return _translate(tree, session, parameters)
    except RecursionError:
        raise invalid(TOO_DEEP) from None


def _translate(
    tree: exp.Expr, session: Zone, parameters: list[dict[str, Any]] | None
) -> Translated:
    tree = bind(tree, parameters or [])
    ctes = {id(table) for table in tree.find_all(exp.Table) if _names_a_cte(table)}
    found = Translated(sql="")
    names: dict[TableRef, str] = {}

    def each(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table):
            return _table(node, ctes, names, found)
        if isinstance(node, exp.Column) and node.args.get("db") is not None:
            node.set("db", None)  # druid.wikipedia.channel: the table's alias names it
            node.set("catalog", None)
        if isinstance(node, (exp.Command, exp.Into)):
            raise unsupported("only SELECT queries are carried out here")
        if isinstance(node, exp.Lateral):
            raise unsupported("LATERAL is not supported (Druid SQL has no LATERAL)")
        return rewrite(node, session)

    rewritten = _bottom_up(tree, each)
    _name_expressions(rewritten)
    found.sql = rewritten.sql(dialect="duckdb", comments=False)
    return found


def _bottom_up(root: exp.Expr, each: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """`each` applied to every node, children first (a Druid function's arguments are
    rewritten before the function around them), each node's result put in its place. With a
    stack of its own, not Python's: a generated filter of a thousand ORs is that deep."""
    done: dict[int, exp.Expr] = {}
    stack: list[tuple[exp.Expr, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(_children(node)))
            continue
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expr):
                node.set(key, done.pop(id(value)))
            elif isinstance(value, list):
                node.set(key, [done.pop(id(v)) if isinstance(v, exp.Expr) else v for v in value])
        done[id(node)] = each(node)
    return done[id(root)]


def _children(node: exp.Expr) -> list[exp.Expr]:
    found: list[exp.Expr] = []
    for value in node.args.values():
        if isinstance(value, exp.Expr):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value if isinstance(v, exp.Expr))
    return found


def _names_a_cte(table: exp.Table) -> bool:
    """Whether an unqualified table name is a CTE where it stands: one of a WITH around it, and
    when it is inside that WITH's own list, one defined before the CTE it is in (or that CTE,
    under WITH RECURSIVE). A CTE's name is nothing outside its query."""
    if table.db or table.catalog or not isinstance(table.this, exp.Identifier):
        return False
    name = str(table.name).lower()
    below: exp.Expr = table
    above = table.parent
    while above is not None:
        with_ = above.args.get("with_")
        if (
            isinstance(with_, exp.With)
            and below is not with_
            and name in (str(c.alias_or_name).lower() for c in with_.expressions)
        ):
            return True
        if isinstance(above, exp.With):
            names = [str(c.alias_or_name).lower() for c in above.expressions]
            place = next(i for i, c in enumerate(above.expressions) if c is below)
            visible = names[: place + 1] if above.args.get("recursive") else names[:place]
            if name in visible:
                return True
        below, above = above, above.parent
    return False


def _table(
    node: exp.Table, ctes: set[int], names: dict[TableRef, str], found: Translated
) -> exp.Expr:
    if not isinstance(node.this, exp.Identifier):
        raise unsupported("table functions (TABLE(...), EXTERN) are not supported")
    name = str(node.name)
    schema = str(node.db) if node.db else ""
    if node.catalog and str(node.catalog).lower() != DRUID:
        raise invalid(f"catalog '{node.catalog}' not found: the only one is 'druid'")
    for clause in ("sample", "pivots", "version", "joins", "laterals"):
        if node.args.get(clause):  # Druid SQL has none of them on a table
            raise unsupported(f"{clause.rstrip('s').upper()} on a table is not supported")
    if id(node) in ctes:
        return node
    if schema and schema.lower() not in SCHEMAS:
        raise invalid(f"Object '{schema}.{name}' not found: no schema '{schema}'")
    ref = TableRef(SCHEMAS[schema.lower()] if schema else DRUID, _table_name(name, schema))
    if ref not in names:
        names[ref] = f"sg_t{len(names)}"
        found.tables[names[ref]] = ref
    alias = node.alias or name
    return exp.Table(
        this=exp.to_identifier(names[ref], quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
    )


def _table_name(name: str, schema: str) -> str:
    # Druid's system tables are named in lower case (sys) and upper case (INFORMATION_SCHEMA)
    if schema.lower() == SYS:
        return name.lower()
    if schema.lower() == INFORMATION_SCHEMA.lower():
        return name.upper()
    return name


def _name_expressions(tree: exp.Expr) -> None:
    """The outermost SELECT's unnamed expressions named EXPR$<position>, as Druid's."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return
    named: list[exp.Expr] = []
    for position, item in enumerate(select.expressions):
        if isinstance(item, (exp.Alias, exp.Column, exp.Star)):
            named.append(item)
        else:
            named.append(exp.alias_(item, f"EXPR${position}", quoted=True))
    select.set("expressions", named)


_SQL_TYPES = {
    "VARCHAR": "VARCHAR",
    "CHAR": "VARCHAR",
    "BIGINT": "BIGINT",
    "INTEGER": "INTEGER",
    "SMALLINT": "SMALLINT",
    "TINYINT": "TINYINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT",
    "REAL": "FLOAT",
    "DECIMAL": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
    "DATE": "DATE",
}


def bind(tree: exp.Expr, parameters: list[dict[str, Any]]) -> exp.Expr:
    """The `?` placeholders replaced, in order, by the parameters as typed literals."""
    if not isinstance(parameters, list):
        raise invalid("parameters: a list of {type, value} objects", field="parameters")
    holes = list(tree.find_all(exp.Placeholder, bfs=False))  # depth first: in the text's order
    if len(holes) != len(parameters):
        raise invalid(
            f"the query has {len(holes)} parameters (?) and the request gives {len(parameters)}",
            field="parameters",
        )
    for index, (hole, given) in enumerate(zip(holes, parameters, strict=True)):
        hole.replace(_parameter(index, given))
    return tree


def _parameter(index: int, given: Any) -> exp.Expr:
    where = f"parameters[{index}]"
    if not isinstance(given, dict) or "type" not in given:
        raise invalid(f"{where}: an object with a type and a value", field=where)
    kind = str(given["type"]).upper()
    if kind not in _SQL_TYPES:
        raise unsupported(f"{where}: type {kind} (one of {', '.join(_SQL_TYPES)})", field=where)
    value = given.get("value")
    if value is None:
        return exp.cast(exp.Null(), exp.DataType.build(_SQL_TYPES[kind]))
    try:
        if kind in ("VARCHAR", "CHAR", "TIMESTAMP", "DATE"):
            if not isinstance(value, str):
                raise ValueError("a string")
            literal: exp.Expr = exp.Literal.string(value)
        elif kind == "BOOLEAN":
            if not isinstance(value, bool):
                raise ValueError("true or false")
            return exp.Boolean(this=value)
        elif kind in ("DOUBLE", "FLOAT", "REAL", "DECIMAL"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError("a number")
            literal = exp.Literal.number(repr(float(value)))
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError("an integer")
            literal = exp.Literal.number(str(value))
    except ValueError as exc:
        raise invalid(f"{where}: a {kind} value must be {exc}", field=where) from None
    except OverflowError:
        raise invalid(f"{where}: {kind} value out of range", field=where) from None
    return exp.cast(literal, exp.DataType.build(_SQL_TYPES[kind]))


def _first_line(exc: Exception) -> str:
    text = str(exc).replace("\x1b[4m", "").replace("\x1b[0m", "")
    return text.splitlines()[0][:300] if text else type(exc).__name__
