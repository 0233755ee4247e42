"""Druid's retention rules, as its coordinator reads them: a datasource's list, then the
default list (datasource `_default`), in order; a segment's interval meets the first rule
that applies to it, and a drop rule marks it unused. A segment no rule applies to is kept.

Load rules: loadForever, loadByPeriod (`period`, `includeFuture` true by default),
loadByInterval (`interval`). Drop rules: dropForever, dropByPeriod (`period`, `includeFuture`
true by default), dropBeforeByPeriod (`period`), dropByInterval (`interval`). Which interval
each applies to, with `now` the time of the check and `[now - period, now)` the period's span:

| rule | applies to a segment [start, end) when |
|---|---|
| loadByPeriod | includeFuture: now - period < end; else it overlaps the span |
| loadByInterval | it overlaps the interval |
| dropByPeriod | includeFuture: now - period <= start; else the span contains it |
| dropBeforeByPeriod | end <= now - period |
| dropByInterval | the interval contains it |

A load rule's `tieredReplicants` and `useDefaultTierForNull` are kept as given: Sluicegate has
no tiers (every reader reads the table), so they change nothing.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tasks.spec.periods import Period, parse_period

DEFAULT = "_default"  # the datasource whose rules follow every datasource's own
DEFAULT_RULES: list[dict[str, Any]] = [
    {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}
]
LOADS = ("loadForever", "loadByPeriod", "loadByInterval")
DROPS = ("dropForever", "dropByPeriod", "dropBeforeByPeriod", "dropByInterval")
_FIELDS = {
    "loadForever": {"tieredReplicants", "useDefaultTierForNull"},
    "loadByPeriod": {"period", "includeFuture", "tieredReplicants", "useDefaultTierForNull"},
    "loadByInterval": {"interval", "tieredReplicants", "useDefaultTierForNull"},
    "dropForever": set(),
    "dropByPeriod": {"period", "includeFuture"},
    "dropBeforeByPeriod": {"period"},
    "dropByInterval": {"interval"},
}
MAX_RULES = 100


class RuleError(ValueError):
    """A rule list that cannot be taken: `field` names where (rules[i].period, say)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Rule:
    type: str
    period: Period | None = None
    interval: tuple[datetime, datetime] | None = None
    include_future: bool = True
    raw: dict[str, Any] | None = None  # as given (what the API answers back)

    @property
    def drops(self) -> bool:
        return self.type in DROPS

    def applies(self, start: datetime, end: datetime, now: datetime) -> bool:
        """Whether this rule applies to a segment interval [start, end) at `now`."""
        kind = self.type
        if kind in ("loadForever", "dropForever"):
            return True
        if self.interval is not None:
            low, high = self.interval
            if kind == "loadByInterval":
                return low < end and start < high
            return low <= start and end <= high  # dropByInterval
        assert self.period is not None
        since = minus(now, self.period)
        if kind == "dropBeforeByPeriod":
            return end <= since
        if kind == "loadByPeriod":
            if self.include_future:
                return since < end
            return since < end and start < now
        if self.include_future:  # dropByPeriod
            return since <= start
        return since <= start and end <= now


def first_match(rules: list[Rule], start: datetime, end: datetime, now: datetime) -> Rule | None:
    for rule in rules:
        if rule.applies(start, end, now):
            return rule
    return None


def minus(moment: datetime, period: Period) -> datetime:
    """`moment` less `period`, its years and months by the calendar (a day past a month's
    end is that month's last day), the rest as fixed lengths, as Joda subtracts."""
    months = moment.year * 12 + (moment.month - 1) - (period.years * 12 + period.months)
    year, month = divmod(months, 12)
    if year < 1:
        return datetime.min.replace(tzinfo=UTC)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    shifted = moment.replace(year=year, month=month + 1, day=day)
    fixed = period.weeks * 7 * 86_400_000 + period.days * 86_400_000
    fixed += period.hours * 3_600_000 + period.minutes * 60_000 + period.millis
    try:
        return shifted - timedelta(milliseconds=fixed)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def parse_time(text: object, field: str) -> datetime:
    """An ISO-8601 time, UTC when it names no zone."""
    if not isinstance(text, str):
        raise RuleError(field, "must be an ISO-8601 time")
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise RuleError(field, f"'{text}' is not an ISO-8601 time in range") from None


def parse_interval(text: object, field: str) -> tuple[datetime, datetime]:
    """Druid's interval: two ISO-8601 times joined by '/' (or '_', as in a URL path)."""
    reason = "must be two ISO-8601 times joined by '/', e.g. 2026-01-01/2026-02-01"
    if not isinstance(text, str):
        raise RuleError(field, reason)
    parts = text.replace("_", "/").split("/")
    if len(parts) != 2:
        raise RuleError(field, reason)
    start, end = (parse_time(part, field) for part in parts)
    if end < start:
        raise RuleError(field, f"'{text}' ends before it starts")
    return start, end


def parse_rules(raw: object) -> list[Rule]:
    """A rule list as the API takes it (a JSON array of rule objects); RuleError naming the
    first field that is wrong."""
    if not isinstance(raw, list):
        raise RuleError("rules", "must be a JSON array of rule objects")
    if len(raw) > MAX_RULES:
        raise RuleError("rules", f"at most {MAX_RULES} rules")
    return [_rule(item, f"rules[{index}]") for index, item in enumerate(raw)]


def _rule(item: object, where: str) -> Rule:
    if not isinstance(item, dict):
        raise RuleError(where, "must be a rule object")
    kind = item.get("type")
    if kind not in _FIELDS:
        known = ", ".join(_FIELDS)
        raise RuleError(f"{where}.type", f"'{kind}' is not one of {known}")
    unknown = set(item) - _FIELDS[kind] - {"type"}
    if unknown:
        raise RuleError(f"{where}.{sorted(unknown)[0]}", f"not a field of {kind}")
    period = interval = None
    if "period" in _FIELDS[kind]:
        try:
            period = parse_period(item.get("period"))  # type: ignore[arg-type]
        except ValueError as exc:
            raise RuleError(f"{where}.period", str(exc)) from None
    if "interval" in _FIELDS[kind]:
        interval = parse_interval(item.get("interval"), f"{where}.interval")
    future = item.get("includeFuture", True)
    if not isinstance(future, bool):
        raise RuleError(f"{where}.includeFuture", "must be true or false")
    replicants = item.get("tieredReplicants", {})
    if not isinstance(replicants, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in replicants.items()
    ):
        raise RuleError(f"{where}.tieredReplicants", "must map tier names to replica counts")
    return Rule(kind, period, interval, future, dict(item))
