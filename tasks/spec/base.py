"""The base of every Druid spec model: unknown Druid fields are kept and returned as given."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Annotated, Any, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator

from tasks.spec.errors import field_error
from tasks.spec.periods import MAX_DURATION_MS, duration_millis, parse_period


class DruidModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """true is not 1: a boolean given for a number is refused (pydantic takes it)."""
        if isinstance(value, bool) and info.field_name and _numeric(cls, info.field_name):
            raise ValueError("must be a number, not true or false")
        return value

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


@cache
def _numeric(model: type[BaseModel], name: str) -> bool:
    """Whether a field takes numbers and not booleans."""
    field = model.model_fields.get(name)
    if field is None:
        return False
    kinds = get_args(field.annotation) or (field.annotation,)
    return bool({int, float} & set(kinds)) and bool not in kinds


def check_period(name: str, value: str | None, *, positive: bool = True) -> None:
    """A period field: a readable error naming `name` when it is not a usable ISO-8601 period."""
    if value is None:
        return
    try:
        if positive:
            duration_millis(value)
        elif parse_period(value).to_millis() > MAX_DURATION_MS:
            raise ValueError(f"'{value}' is longer than the most allowed")
    except ValueError as exc:
        raise field_error(name, str(exc)) from None


def _positive_period(value: str) -> str:
    duration_millis(value)
    return value


def _long_period(value: str) -> str:
    duration_millis(value, longest=None)
    return value


def _fixed_period(value: str) -> str:
    if parse_period(value).to_millis() > MAX_DURATION_MS:
        raise ValueError(f"'{value}' is longer than {MAX_DURATION_MS // 86_400_000} days")
    return value


def _iso_datetime(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"'{value}' is not an ISO-8601 date-time") from None
    return value


# An ISO-8601 period with a fixed length longer than zero (a duration or a timeout).
PositivePeriod = Annotated[str, AfterValidator(_positive_period)]
# The same of any length, never added to a time (Druid's "never" is P2147483647D).
LongPeriod = Annotated[str, AfterValidator(_long_period)]
# An ISO-8601 period with a fixed length, zero allowed (a delay).
FixedPeriod = Annotated[str, AfterValidator(_fixed_period)]
IsoDateTime = Annotated[str, AfterValidator(_iso_datetime)]
