"""The base of every Druid spec model: unknown Druid fields are kept and returned as given."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict

from tasks.spec.errors import field_error
from tasks.spec.periods import duration_millis, parse_period


class DruidModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def check_period(name: str, value: str | None, *, positive: bool = True) -> None:
    """A period field: a readable error naming `name` when it is not a usable ISO-8601 period."""
    if value is None:
        return
    try:
        if positive:
            duration_millis(value)
        else:
            parse_period(value).to_millis()
    except ValueError as exc:
        raise field_error(name, str(exc)) from None


def _positive_period(value: str) -> str:
    duration_millis(value)
    return value


def _fixed_period(value: str) -> str:
    parse_period(value).to_millis()
    return value


def _iso_datetime(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"'{value}' is not an ISO-8601 date-time") from None
    return value


# An ISO-8601 period with a fixed length longer than zero (a duration or a timeout).
PositivePeriod = Annotated[str, AfterValidator(_positive_period)]
# An ISO-8601 period with a fixed length, zero allowed (a delay).
FixedPeriod = Annotated[str, AfterValidator(_fixed_period)]
IsoDateTime = Annotated[str, AfterValidator(_iso_datetime)]
