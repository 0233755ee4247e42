"""Turning validation failures into field paths and reasons a user can act on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

_FIELD_PREFIX = re.compile(r"^@(?P<field>[A-Za-z0-9_.\[\]-]+): (?P<reason>.*)$", re.S)
# Parts of a pydantic error location that name a union branch or a type, not a field.
_TYPE_TAGS = re.compile(
    r"^(str|int|float|bool|dict|list|none|"
    r"[A-Z][A-Za-z]*|function-[a-z]+\[.*\]|json-or-python\[.*\]|tagged-union\[.*\]|"
    r"union\[.*\]|chain\[.*\]|lax-or-strict\[.*\]|literal\[.*\])$"
)


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class SpecError(ValueError):
    """One or more problems with a submitted document, each naming its field."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(error) for error in errors))

    @classmethod
    def single(cls, field: str, reason: str) -> SpecError:
        return cls([FieldError(field, reason)])


def field_error(field: str, reason: str) -> ValueError:
    """Raise from a model validator to pin the error on a sub-field of that model."""
    return ValueError(f"@{field}: {reason}")


def _path(parts: list[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def from_validation_error(error: ValidationError, prefix: tuple[Any, ...] = ()) -> SpecError:
    found: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for item in error.errors(include_url=False):
        loc = [
            part for part in item["loc"] if isinstance(part, int) or not _TYPE_TAGS.match(str(part))
        ]
        message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        match = _FIELD_PREFIX.match(message)
        if match:
            loc.extend(match.group("field").split("."))
            message = match.group("reason")
        if item["type"] == "extra_forbidden":
            message = "is not a known field here"
        entry = (_path([*prefix, *loc]), message)
        if entry not in seen:
            seen.add(entry)
            found.append(FieldError(*entry))
    return SpecError(found)
