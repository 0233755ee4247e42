"""The base of every Druid spec model: unknown Druid fields are kept and returned as given."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from supervisor.schemas.errors import field_error
from supervisor.schemas.periods import duration_millis, parse_period


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


def check_datetime(name: str, value: str | None) -> None:
    if value is None:
        return
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise field_error(name, f"'{value}' is not an ISO-8601 date-time") from None
