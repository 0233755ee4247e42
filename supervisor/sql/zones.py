"""Druid's time notations, as Python reads them for the SQL translation: a query's time zone
(an IANA name, UTC, or a whole-hour offset), an ISO 8601 period (PT1H, P1D, P1M) and interval
(start/end, start/period, period/end), and a Joda-Time pattern (TIME_FORMAT's, TIME_PARSE's)
as strftime's."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from supervisor.sql.errors import invalid, unsupported


@dataclass(frozen=True)
class Zone:
    """A query's time zone: its name for DuckDB (an IANA name; a whole-hour offset as
    Etc/GMT-N) and for rendering results."""

    name: str
    info: tzinfo


def zone(text: str, field: str = "context.sqlTimeZone") -> Zone:
    """A Druid time zone (an IANA name, UTC, Z, or an offset such as -08:00)."""
    raw = text.strip()
    if raw.upper() in ("UTC", "Z", "GMT", "+00:00", "-00:00", "ETC/UTC"):
        return Zone("UTC", UTC)
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?", raw)
    if offset:
        sign, hours, minutes = offset.group(1), int(offset.group(2)), int(offset.group(3) or 0)
        signed = hours if sign == "+" else -hours
        if minutes or not -12 <= signed <= 14:  # the Etc zones: UTC-12 to UTC+14
            raise unsupported(
                f"{field}: only whole-hour offsets from -12:00 to +14:00 are supported, not '{raw}'"
            )
        etc = f"Etc/GMT{'-' if signed > 0 else '+'}{abs(signed)}"
        return Zone(etc, timezone(timedelta(hours=signed)))
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+\-/]{0,63}", raw):
        raise invalid(f"{field}: '{raw}' is not a time zone")
    try:
        return Zone(raw, ZoneInfo(raw))
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid(f"{field}: unknown time zone '{raw}'") from None


_PERIOD = re.compile(
    r"P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?"
)


def period(text: str) -> tuple[str, bool]:
    """An ISO 8601 period as DuckDB's interval text, and whether it is one week (bucketed from
    a Monday, as Druid's P1W)."""
    found = _PERIOD.fullmatch(text.strip().upper())
    if not found or not any(found.groups()):
        raise invalid(f"'{text}' is not an ISO 8601 period (such as PT1H, P1D, P1M)")
    years, months, weeks, days, hours, minutes, seconds = found.groups()
    monthly = bool(years or months)
    if monthly and (weeks or days or hours or minutes or seconds):
        raise unsupported(f"period '{text}': months and years mix with no shorter unit here")
    parts = [
        f"{value} {unit}"
        for value, unit in (
            (years, "years"),
            (months, "months"),
            (weeks, "weeks"),
            (days, "days"),
            (hours, "hours"),
            (minutes, "minutes"),
            (seconds, "seconds"),
        )
        if value
    ]
    return " ".join(parts), text.strip().upper() == "P1W"


# Joda-Time's pattern letters (Druid's TIME_FORMAT and TIME_PARSE) as strftime's
_JODA = {
    "yyyy": "%Y",
    "YYYY": "%Y",
    "yy": "%y",
    "MMMM": "%B",
    "MMM": "%b",
    "MM": "%m",
    "M": "%-m",
    "dd": "%d",
    "d": "%-d",
    "DDD": "%j",
    "HH": "%H",
    "H": "%-H",
    "hh": "%I",
    "h": "%-I",
    "mm": "%M",
    "m": "%-M",
    "ss": "%S",
    "s": "%-S",
    "SSS": "%g",
    "SSSSSS": "%f",
    "a": "%p",
    "EEEE": "%A",
    "EEE": "%a",
    "E": "%a",
}
_TOKEN = re.compile(r"'((?:[^']|'')*)'|(ZZ|Z)|([A-Za-z])\3*|([^A-Za-z']+)")


def joda(pattern: str) -> list[str | bool]:
    """A Joda pattern as strftime fragments; an offset (Z: +0800, ZZ: +08:00) is True/False
    (its colon) in the list, for the caller to put in."""
    parts: list[str | bool] = []
    for found in _TOKEN.finditer(pattern):
        quoted, offset, letter, other = found.groups()
        if quoted is not None:
            text = quoted.replace("''", "'") if quoted else "'"  # '' is a quote, in or out
            parts.append(text.replace("%", "%%"))
        elif offset is not None:
            parts.append(offset == "ZZ")
        elif letter is not None:
            token = found.group(0)
            if token not in _JODA:
                raise unsupported(f"time pattern letter '{token}' in '{pattern}'")
            parts.append(_JODA[token])
        else:
            parts.append(other.replace("%", "%%"))
    if "".join(found.group(0) for found in _TOKEN.finditer(pattern)) != pattern:
        raise invalid(f"'{pattern}' is not a time pattern")
    return parts


def iso_interval(text: str, session: Zone) -> tuple[datetime, datetime]:
    """An ISO 8601 interval (start/end, start/period, period/end); times without an offset
    are in the query's zone."""
    halves = text.split("/")
    if len(halves) != 2:
        raise invalid(f"'{text}' is not an ISO 8601 interval (start/end)")
    first, second = halves
    if first.upper().startswith("P") and second.upper().startswith("P"):
        raise invalid(f"'{text}': an interval has at most one period")
    if first.upper().startswith("P"):
        end = _instant(second, session)
        return _step(end, first, -1), end
    start = _instant(first, session)
    end = _step(start, second, 1) if second.upper().startswith("P") else _instant(second, session)
    if end < start:
        raise invalid(f"interval '{text}' ends before it starts")
    return start, end


def _instant(text: str, session: Zone) -> datetime:
    given = text.strip()
    if re.fullmatch(r"\d{4}(-\d{2})?", given):  # a year, a month: their first instant
        given += "-01" if len(given) == 7 else "-01-01"
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise invalid(f"'{text}' is not an ISO 8601 time") from None
    return moment.replace(tzinfo=session.info) if moment.tzinfo is None else moment


def _step(moment: datetime, text: str, sign: int) -> datetime:
    try:
        return _stepped(moment, text, sign)
    except (ValueError, OverflowError):  # past year 9999 or before year 1
        raise invalid(f"'{text}' from {moment.isoformat()} leaves the years 1 to 9999") from None


def _stepped(moment: datetime, text: str, sign: int) -> datetime:
    found = _PERIOD.fullmatch(text.strip().upper())
    if not found or not any(found.groups()):
        raise invalid(f"'{text}' is not an ISO 8601 period")
    years, months, weeks, days, hours, minutes, seconds = (float(g or 0) for g in found.groups())
    total_months = int(years * 12 + months) * sign
    year, month = divmod(moment.month - 1 + total_months, 12)
    last = calendar.monthrange(moment.year + year, month + 1)[1]  # Jan 31 + P1M: Feb 28/29
    moved = moment.replace(year=moment.year + year, month=month + 1, day=min(moment.day, last))
    delta = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return moved + delta * sign
