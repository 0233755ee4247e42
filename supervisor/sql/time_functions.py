"""Druid SQL's time functions rewritten into DuckDB's: TIME_FLOOR, TIME_CEIL, TIME_SHIFT,
TIME_EXTRACT, TIME_PARSE, TIME_FORMAT, FLOOR/CEIL(__time TO unit), TIME_IN_INTERVAL,
TIMESTAMPADD and TIMESTAMPDIFF.

Time is computed in the query's zone (`sqlTimeZone`, or a function's own zone argument):
`timezone(zone, instant)` is the wall-clock time there, bucketed or formatted, and
`timezone(zone, wall clock)` the instant again, as Druid floors periods in a zone."""

from __future__ import annotations

from sqlglot import exp

from supervisor.sql.errors import invalid, unsupported
from supervisor.sql.zones import Zone, iso_interval, joda, period, zone

# macros every query may call (engine.py creates them once per database)
MACROS = (
    # an instant floored to `width` from `origin`, both wall-clock times in `zone`
    "CREATE MACRO sg_floor(ts, width, origin, zone) AS"
    " timezone(zone, time_bucket(width, timezone(zone, ts), origin))",
    "CREATE MACRO sg_ceil(ts, width, origin, zone) AS"
    " CASE WHEN sg_floor(ts, width, origin, zone) = ts THEN ts"
    " ELSE timezone(zone, time_bucket(width, timezone(zone, ts), origin) + width) END",
    # the same in UTC, for a width and origin of whole seconds (in microseconds here): integer
    # arithmetic on the epoch, several times faster than the zone conversions above
    "CREATE MACRO sg_floor_utc(ts, width, origin) AS to_timestamp(("
    " epoch_us(ts) - (((epoch_us(ts) - origin) % width) + width) % width) // 1000000)",
    "CREATE MACRO sg_ceil_utc(ts, width, origin) AS"
    " CASE WHEN sg_floor_utc(ts, width, origin) = ts THEN ts"
    " ELSE to_timestamp((epoch_us(ts) - (((epoch_us(ts) - origin) % width) + width) % width"
    " + width) // 1000000) END",
    # an instant's offset from UTC in `zone`: +08:00 (colon) or +0800, Z for none
    "CREATE MACRO sg_offset(ts, zone, colon) AS CASE"
    " WHEN epoch(timezone(zone, ts)) = epoch(ts) THEN 'Z' ELSE"
    " (CASE WHEN epoch(timezone(zone, ts)) > epoch(ts) THEN '+' ELSE '-' END)"
    " || lpad(CAST(abs(CAST(epoch(timezone(zone, ts)) - epoch(ts) AS BIGINT)) // 3600"
    " AS VARCHAR), 2, '0') || colon"
    " || lpad(CAST(abs(CAST(epoch(timezone(zone, ts)) - epoch(ts) AS BIGINT)) % 3600 // 60"
    " AS VARCHAR), 2, '0') END",
)

WRITTEN = "sluicegate"  # the meta key of the calls this translation wrote

UNITS = {
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
}


def _text(node: exp.Expr | None, what: str) -> str:
    if not isinstance(node, exp.Literal) or not node.is_string:
        raise unsupported(f"{what} must be a string literal")
    return str(node.this)


def _zone_arg(args: list[exp.Expr], index: int, session: Zone) -> exp.Expr:
    if len(args) > index and not isinstance(args[index], exp.Null):
        return exp.Literal.string(zone(_text(args[index], "a time zone argument"), "zone").name)
    return exp.Literal.string(session.name)


def _interval(text: str) -> exp.Expr:
    return exp.cast(exp.Literal.string(text), exp.DataType.build("INTERVAL"))


def call(name: str, *args: exp.Expr) -> exp.Expr:
    """A call of DuckDB's function `name`, marked as written here (not checked again)."""
    call = exp.Anonymous(this=name, expressions=list(args))
    call.meta[WRITTEN] = True
    return call


def arity(name: str, args: list[exp.Expr], least: int, most: int) -> None:
    if not least <= len(args) <= most:
        count = f"{least}" if least == most else f"{least} to {most}"
        raise invalid(f"{name} takes {count} arguments, not {len(args)}")


def _origin(args: list[exp.Expr], index: int, week: bool) -> exp.Expr:
    """The wall-clock origin periods are counted from: the argument, else 1970-01-01 (a
    Monday, 1970-01-05, for a week)."""
    if len(args) > index and not isinstance(args[index], exp.Null):
        return exp.cast(args[index], exp.DataType.build("TIMESTAMP"))
    return exp.cast(
        exp.Literal.string("1970-01-05" if week else "1970-01-01"), exp.DataType.build("TIMESTAMP")
    )


UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z"}
SECONDS = {"week": 604_800, "day": 86_400, "hour": 3_600, "minute": 60, "second": 1}


def time_floor(args: list[exp.Expr], session: Zone, ceil: bool = False) -> exp.Expr:
    name = "TIME_CEIL" if ceil else "TIME_FLOOR"
    arity(name, args, 2, 4)
    width, week = period(_text(args[1], f"{name}'s period"))
    where = _zone_arg(args, 3, session)
    if len(args) < 3 or isinstance(args[2], exp.Null):  # from the epoch (a Monday for P1W)
        fast = _in_utc(args[0], width, 4 * 86_400 if week else 0, where, ceil)
        if fast is not None:
            return fast
    return call(
        "sg_ceil" if ceil else "sg_floor", args[0], _interval(width), _origin(args, 2, week), where
    )


def _in_utc(
    instant: exp.Expr, width: str, origin_s: int, where: exp.Expr, ceil: bool
) -> exp.Expr | None:
    """The floor (or ceiling) by epoch arithmetic, when the zone is UTC and the width whole
    seconds of fixed length (no months or years); None otherwise."""
    if where.name not in UTC_NAMES:
        return None
    total = 0
    for value, unit in zip(width.split()[::2], width.split()[1::2], strict=True):
        unit = unit.removesuffix("s")
        if unit not in SECONDS or not value.isdigit():
            return None
        total += int(value) * SECONDS[unit]
    if total <= 0:
        return None
    return call(
        "sg_ceil_utc" if ceil else "sg_floor_utc",
        instant,
        exp.Literal.number(total * 1_000_000),
        exp.Literal.number(origin_s * 1_000_000),
    )


def floor_to(node: exp.Floor | exp.Ceil, session: Zone) -> exp.Expr:
    """FLOOR(ts TO unit), CEIL(ts TO unit): in the query's zone."""
    unit = str(node.args["to"].name).upper()
    if unit not in UNITS - {"MILLISECOND"}:
        raise unsupported(f"FLOOR/CEIL TO {unit}: the units are {', '.join(sorted(UNITS))}")
    width = _width(unit)
    where = exp.Literal.string(session.name)
    fast = _in_utc(node.this, width, 4 * 86_400 if unit == "WEEK" else 0, where, ceil_of(node))
    if fast is not None:
        return fast
    origin = exp.cast(
        exp.Literal.string("1970-01-05" if unit == "WEEK" else "1970-01-01"),
        exp.DataType.build("TIMESTAMP"),
    )
    return call(
        "sg_ceil" if ceil_of(node) else "sg_floor", node.this, _interval(width), origin, where
    )


def ceil_of(node: exp.Floor | exp.Ceil) -> bool:
    return isinstance(node, exp.Ceil)


def _unit(node: exp.Expr, name: str) -> str:
    """A time unit argument, as SQL writes it (HOUR, or JDBC's SQL_TSI_HOUR)."""
    bare = isinstance(node, exp.Var) or (isinstance(node, exp.Column) and not node.table)
    given = node.name if bare else ""
    unit = str(given).upper().removeprefix("SQL_TSI_")
    if unit not in UNITS:
        raise invalid(f"{name}'s unit must be one of {', '.join(sorted(UNITS))}")
    return unit


def _width(unit: str) -> str:
    return "3 months" if unit == "QUARTER" else f"1 {unit.lower()}"


def timestamp_add(args: list[exp.Expr], session: Zone) -> exp.Expr:
    """TIMESTAMPADD(unit, count, timestamp): the timestamp moved by count units, on the wall
    clock of the query's zone (a month later is the same day and hour there)."""
    arity("TIMESTAMPADD", args, 3, 3)
    width = _width(_unit(args[0], "TIMESTAMPADD"))
    return _moved(args[2], width, args[1], exp.Literal.string(session.name))


def timestamp_diff(node: exp.TimestampDiff) -> exp.Expr:
    """TIMESTAMPDIFF(unit, timestamp1, timestamp2): the whole units from the first to the
    second, negative when the second is earlier (a month counts once its day and time come
    round again). sqlglot reads Druid's three arguments in its own order: this is the unit."""
    args = [node.this, node.expression, node.args.get("unit")]
    if any(arg is None for arg in args) or not isinstance(node.this, (exp.Column, exp.Var)):
        raise invalid("TIMESTAMPDIFF takes 3 arguments: a unit and two timestamps")
    unit = _unit(args[0], "TIMESTAMPDIFF")
    return call("date_sub", exp.Literal.string(unit.lower()), args[1], args[2])


def time_shift(args: list[exp.Expr], session: Zone) -> exp.Expr:
    arity("TIME_SHIFT", args, 3, 4)
    width, _ = period(_text(args[1], "TIME_SHIFT's period"))
    return _moved(args[0], width, args[2], _zone_arg(args, 3, session))


def _moved(instant: exp.Expr, width: str, steps: exp.Expr, where: exp.Expr) -> exp.Expr:
    """`instant` moved by `steps` periods of `width` on the wall clock of the zone `where`."""
    moved = exp.Add(
        this=call("timezone", where, instant),
        expression=exp.Mul(this=_interval(width), expression=exp.Paren(this=steps)),
    )
    return call("timezone", where.copy(), moved)


_EXTRACT = {
    "EPOCH": None,
    "MILLISECOND": "millisecond",
    "SECOND": "second",
    "MINUTE": "minute",
    "HOUR": "hour",
    "DAY": "day",
    "DOW": "isodow",
    "ISODOW": "isodow",
    "DOY": "doy",
    "WEEK": "week",
    "MONTH": "month",
    "QUARTER": "quarter",
    "YEAR": "year",
    "ISOYEAR": "isoyear",
    "CENTURY": "century",
    "DECADE": "decade",
    "MILLENNIUM": "millennium",
}


def time_extract(args: list[exp.Expr], session: Zone) -> exp.Expr:
    arity("TIME_EXTRACT", args, 1, 3)
    unit = _text(args[1], "TIME_EXTRACT's unit").upper() if len(args) > 1 else "MILLISECOND"
    if unit not in _EXTRACT:
        raise unsupported(f"TIME_EXTRACT unit '{unit}': one of {', '.join(_EXTRACT)}")
    part = _EXTRACT[unit]
    if part is None:
        return exp.cast(call("epoch", args[0]), exp.DataType.build("BIGINT"))
    local = call("timezone", _zone_arg(args, 2, session), args[0])
    value = call("date_part", exp.Literal.string(part), local)
    if unit == "MILLISECOND":
        value = exp.Mod(this=value, expression=exp.Literal.number(1000))
    return exp.cast(value, exp.DataType.build("BIGINT"))


ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSZZ"


def time_format(args: list[exp.Expr], session: Zone) -> exp.Expr:
    arity("TIME_FORMAT", args, 1, 3)
    given = len(args) > 1 and not isinstance(args[1], exp.Null)
    pattern = _text(args[1], "TIME_FORMAT's pattern") if given else ISO
    where = _zone_arg(args, 2, session)
    local = call("timezone", where, args[0])
    pieces: list[exp.Expr] = []
    fragment = ""  # strftime's format up to the next offset

    def flush() -> None:
        if fragment:
            pieces.append(call("strftime", local.copy(), exp.Literal.string(fragment)))

    for part in joda(pattern):
        if isinstance(part, bool):
            flush()
            fragment = ""
            colon = exp.Literal.string(":" if part else "")
            pieces.append(call("sg_offset", args[0].copy(), where.copy(), colon))
        else:
            fragment += part
    flush()
    if not pieces:
        return exp.Literal.string("")
    out = pieces[0]
    for piece in pieces[1:]:
        out = exp.DPipe(this=out, expression=piece)
    return out


def time_parse(args: list[exp.Expr], session: Zone) -> exp.Expr:
    """TIME_PARSE(text[, pattern[, zone]]): null where the text does not parse, as Druid."""
    arity("TIME_PARSE", args, 1, 3)
    where = _zone_arg(args, 2, session)
    if len(args) > 1 and not isinstance(args[1], exp.Null):
        parts = joda(_text(args[1], "TIME_PARSE's pattern"))
        if any(isinstance(part, bool) for part in parts):
            raise unsupported("TIME_PARSE with an offset (Z) in its pattern")
        wall = call("try_strptime", args[0], exp.Literal.string("".join(map(str, parts))))
        return call("timezone", where, wall)
    has_offset = call("regexp_matches", args[0], exp.Literal.string(r"(Z|[+-]\d\d(:?\d\d)?)$"))
    return exp.Case(
        ifs=[
            exp.If(
                this=has_offset,
                true=exp.TryCast(this=args[0], to=exp.DataType.build("TIMESTAMPTZ")),
            )
        ],
        default=call(
            "timezone", where, exp.TryCast(this=args[0], to=exp.DataType.build("TIMESTAMP"))
        ),
    )


def time_in_interval(args: list[exp.Expr], session: Zone) -> exp.Expr:
    arity("TIME_IN_INTERVAL", args, 2, 2)
    start, end = iso_interval(_text(args[1], "TIME_IN_INTERVAL's interval"), session)
    low = exp.cast(exp.Literal.string(start.isoformat()), exp.DataType.build("TIMESTAMPTZ"))
    high = exp.cast(exp.Literal.string(end.isoformat()), exp.DataType.build("TIMESTAMPTZ"))
    return exp.Paren(
        this=exp.And(
            this=exp.GTE(this=args[0], expression=low),
            expression=exp.LT(this=args[0].copy(), expression=high),
        )
    )
