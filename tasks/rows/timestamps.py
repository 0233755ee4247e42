"""timestampSpec → a Spark expression giving epoch milliseconds (null when unparseable)."""

from __future__ import annotations

from typing import Any

from tasks.spec.data_schema import TimestampSpec

# Joda pattern letters that java.time (Spark's datetime patterns) reads differently.
_JODA_TO_JAVA = {"ZZ": "XXX", "ZZZ": "VV"}


def _iso(text: Any) -> Any:
    from pyspark.sql import functions as F

    return F.unix_millis(text.try_cast("timestamp"))


def _numeric(text: Any, unit_ms: float) -> Any:
    from pyspark.sql import functions as F

    number = text.try_cast("double")
    return F.floor(number * F.lit(unit_ms)).cast("long")


def _pattern(text: Any, pattern: str) -> Any:
    from pyspark.sql import functions as F

    for joda, java in _JODA_TO_JAVA.items():
        pattern = pattern.replace(joda, java)
    return F.unix_millis(F.try_to_timestamp(text, F.lit(pattern)))


def parse(text: Any, fmt: str) -> Any:
    from pyspark.sql import functions as F

    kind = fmt.lower()
    if kind == "iso":
        return _iso(text)
    if kind == "millis":
        return _numeric(text, 1)
    if kind == "posix":
        return _numeric(text, 1000)
    if kind == "micro":
        return _numeric(text, 0.001)
    if kind == "nano":
        return _numeric(text, 0.000001)
    if kind == "auto":
        # Druid's auto: a number is millis, anything else ISO-8601
        return F.when(text.rlike(r"^-?\d+(\.\d+)?$"), _numeric(text, 1)).otherwise(_iso(text))
    return _pattern(text, fmt)


def time_ms(spec: TimestampSpec, field: Any) -> Any:
    """Epoch millis of a row. Where the column is absent or null, the missingValue (ISO-8601
    whatever the format, as in Druid) stands in."""
    from pyspark.sql import functions as F

    value = field(spec.column)
    parsed = parse(value, spec.format)
    if spec.missingValue is None:
        return parsed
    missing = spec.missingValue
    stand_in = F.lit(missing) if isinstance(missing, int) else _iso(F.lit(missing))
    return F.when(value.isNull(), stand_in).otherwise(parsed)
