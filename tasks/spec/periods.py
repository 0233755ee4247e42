"""ISO-8601 periods as Druid (Joda) accepts them: `PT1H`, `P1D`, `PT0.5S`, `P2147483647D`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_PERIOD = re.compile(
    r"^P(?!$)(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:[.,]\d{1,3})?)S)?)?$"
)
_MS = {"weeks": 604_800_000, "days": 86_400_000, "hours": 3_600_000, "minutes": 60_000}


@dataclass(frozen=True)
class Period:
    text: str
    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    millis: int = 0

    @property
    def has_calendar_fields(self) -> bool:
        return bool(self.years or self.months)

    def to_millis(self) -> int:
        """The fixed length of the period. Years and months have none, as in Joda."""
        if self.has_calendar_fields:
            raise ValueError(f"'{self.text}' has years or months, which have no fixed length")
        return (
            self.weeks * _MS["weeks"]
            + self.days * _MS["days"]
            + self.hours * _MS["hours"]
            + self.minutes * _MS["minutes"]
            + self.millis
        )


def parse_period(text: str) -> Period:
    """Parse an ISO-8601 period; a ValueError names what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"'{text}' is not an ISO-8601 period such as PT1H, PT30S or P1D")
    return _parse(text)


@lru_cache(maxsize=1024)  # a pass reads its spec's periods each time; a spec has a few
def _parse(text: str) -> Period:
    match = _PERIOD.match(text.strip().upper())
    if match is None:
        raise ValueError(f"'{text}' is not an ISO-8601 period such as PT1H, PT30S or P1D")
    parts = {key: value for key, value in match.groupdict().items() if value is not None}
    seconds = parts.pop("seconds", "0").replace(",", ".")
    whole, _, fraction = seconds.partition(".")
    millis = int(whole) * 1000 + int((fraction + "000")[:3])
    return Period(text=text, millis=millis, **{key: int(value) for key, value in parts.items()})


# The longest duration a spec may give where it is added to a time (a task's duration, a
# timeout): a hundred years. Longer ones overflowed the date arithmetic of every pass.
MAX_DURATION_MS = 36_500 * _MS["days"]


def duration_millis(text: str, *, longest: int | None = MAX_DURATION_MS) -> int:
    """Parse a period that must have a fixed, positive length (a timeout, a duration) of at
    most `longest` milliseconds (None: any)."""
    period = parse_period(text)
    millis = period.to_millis()
    if millis <= 0:
        raise ValueError(f"'{text}' must be longer than zero")
    if longest is not None and millis > longest:
        raise ValueError(f"'{text}' is longer than {longest // _MS['days']} days, the most allowed")
    return millis
