"""Druid's authorization model: permissions are (resource type, resource name regex, action);
a user holds the permissions of its roles. WRITE does not include READ."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tasks.spec.errors import FieldError, SpecError


class ResourceType(StrEnum):
    DATASOURCE = "DATASOURCE"
    STATE = "STATE"
    CONFIG = "CONFIG"
    # Druid's other types: kept in roles (a Druid admin's roles load as they are); nothing in
    # Sluicegate asks for them
    VIEW = "VIEW"
    EXTERNAL = "EXTERNAL"
    SYSTEM_TABLE = "SYSTEM_TABLE"
    QUERY_CONTEXT = "QUERY_CONTEXT"


class Action(StrEnum):
    READ = "READ"
    WRITE = "WRITE"


SECURITY = "security"  # the CONFIG resource of the user, role and permission API (Druid's)
MAX_PATTERN = 1000


@dataclass(frozen=True)
class Permission:
    type: ResourceType
    name: str  # a regular expression, matched against the whole resource name
    action: Action
    pattern: re.Pattern[str] = field(compare=False, repr=False)

    def allows(self, kind: ResourceType, name: str, action: Action) -> bool:
        return self.type is kind and self.action is action and bool(self.pattern.fullmatch(name))

    def to_json(self) -> dict[str, Any]:
        return {"resource": {"name": self.name, "type": str(self.type)}, "action": str(self.action)}


def permission(kind: str, name: str, action: str) -> Permission:
    return Permission(ResourceType(kind), name, Action(action), re.compile(name))


def parse_permissions(raw: Any, where: str = "") -> list[Permission]:
    """Druid's permission list; every problem a 400 naming its field."""
    if not isinstance(raw, list):
        raise SpecError.single(where, "must be a list of {resource: {name, type}, action}")
    found: list[Permission] = []
    problems: list[FieldError] = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        resource = item.get("resource") if isinstance(item, dict) else None
        if not isinstance(resource, dict):
            problems.append(FieldError(f"{at}.resource", "must be {name, type}"))
            continue
        kind, name, action = resource.get("type"), resource.get("name"), item.get("action")
        if not isinstance(kind, str) or kind not in ResourceType.__members__:
            known = ", ".join(ResourceType.__members__)
            problems.append(FieldError(f"{at}.resource.type", f"must be one of {known}"))
        elif not isinstance(action, str) or action not in Action.__members__:
            problems.append(FieldError(f"{at}.action", "must be READ or WRITE"))
        elif not isinstance(name, str) or not name or len(name) > MAX_PATTERN:
            problems.append(FieldError(f"{at}.resource.name", "must be a regular expression"))
        else:
            try:
                found.append(permission(str(kind), name, str(action)))
            except re.error as exc:
                problems.append(
                    FieldError(f"{at}.resource.name", f"is not a regular expression: {exc}")
                )
    if problems:
        raise SpecError(problems)
    return found


ALL_PERMISSIONS = [permission(kind, ".*", action) for kind in ResourceType for action in Action]


@dataclass(frozen=True)
class Identity:
    """Who a request comes from, and what it may do. `name` is what the audit log records."""

    name: str
    permissions: tuple[Permission, ...]
    authenticated: bool = True

    def allows(self, kind: ResourceType, name: str, action: Action) -> bool:
        return any(p.allows(kind, name, action) for p in self.permissions)

    def allows_every(self, kind: ResourceType, action: Action) -> bool:
        """Holds `action` on every resource of the kind (a `.*` permission, as admin's)."""
        return any(
            p.type is kind and p.action is action and p.name in (".*", ".+", "^.*$")
            for p in self.permissions
        )


# With authentication off every request may do everything; the audit log keeps what the
# X-Druid-Author header says.
ANONYMOUS = Identity("", tuple(ALL_PERMISSIONS), authenticated=False)
