"""Users, tokens, roles and permissions in the metadata DB (no commits: the caller's unit of
work commits)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.db.models import (
    ApiTokenRow,
    AuthnUserRow,
    AuthzRoleRow,
    AuthzUserRoleRow,
    AuthzUserRow,
)
from supervisor.errors import Raced

# the advisory lock key of changes to users, roles and permissions ("sluiceSC" as 8 bytes)
SECURITY_CHANGES = int.from_bytes(b"sluiceSC", "big") - (1 << 63)


class SecurityRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def _add(self, row: Any) -> None:
        self.session.add(row)
        try:
            self.session.flush()
        except IntegrityError:
            raise Raced("another request made it meanwhile; try again") from None

    def one_change_at_a_time(self) -> None:
        """Inside the caller's transaction, until it ends: no other change to users, roles or
        permissions runs beside it. On PostgreSQL (read committed) two administrators deleting
        each other at once would each see the other still there and both commit; a
        transaction-scoped advisory lock queues them. SQLite has one writer at a time, and a
        change's check after its first write reads what the other committed."""
        if self.session.get_bind().dialect.name == "postgresql":
            self.session.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": SECURITY_CHANGES}
            )

    # authentication users

    def authn_user(self, name: str) -> AuthnUserRow | None:
        return self.session.get(AuthnUserRow, name)

    def authn_names(self) -> list[str]:
        return list(self.session.scalars(select(AuthnUserRow.name).order_by(AuthnUserRow.name)))

    def authn_count(self) -> int:
        return int(self.session.scalar(select(func.count()).select_from(AuthnUserRow)) or 0)

    def add_authn_user(self, name: str, now: datetime) -> AuthnUserRow:
        row = AuthnUserRow(name=name, created_at=now)
        self._add(row)
        return row

    def delete_authn_user(self, name: str) -> None:
        self.session.execute(delete(ApiTokenRow).where(ApiTokenRow.user_name == name))
        self.session.execute(delete(AuthnUserRow).where(AuthnUserRow.name == name))

    # tokens

    def token(self, digest: str) -> ApiTokenRow | None:
        return self.session.get(ApiTokenRow, digest)

    def tokens(self, user: str) -> list[ApiTokenRow]:
        query = select(ApiTokenRow).where(ApiTokenRow.user_name == user).order_by(ApiTokenRow.name)
        return list(self.session.scalars(query))

    def add_token(self, user: str, name: str, digest: str, now: datetime) -> None:
        self._add(ApiTokenRow(digest=digest, user_name=user, name=name, created_at=now))

    def delete_token(self, user: str, name: str) -> int:
        result = self.session.execute(
            delete(ApiTokenRow).where(ApiTokenRow.user_name == user, ApiTokenRow.name == name)
        )
        return int(getattr(result, "rowcount", 0) or 0)

    # authorization users, roles and their assignment

    def authz_user(self, name: str) -> AuthzUserRow | None:
        return self.session.get(AuthzUserRow, name)

    def authz_names(self) -> list[str]:
        return list(self.session.scalars(select(AuthzUserRow.name).order_by(AuthzUserRow.name)))

    def add_authz_user(self, name: str) -> None:
        self._add(AuthzUserRow(name=name))

    def delete_authz_user(self, name: str) -> None:
        self.session.execute(delete(AuthzUserRoleRow).where(AuthzUserRoleRow.user_name == name))
        self.session.execute(delete(AuthzUserRow).where(AuthzUserRow.name == name))

    def role(self, name: str) -> AuthzRoleRow | None:
        return self.session.get(AuthzRoleRow, name)

    def role_names(self) -> list[str]:
        return list(self.session.scalars(select(AuthzRoleRow.name).order_by(AuthzRoleRow.name)))

    def add_role(self, name: str, permissions: list[dict[str, Any]]) -> None:
        self._add(AuthzRoleRow(name=name, permissions=permissions))

    def delete_role(self, name: str) -> None:
        self.session.execute(delete(AuthzUserRoleRow).where(AuthzUserRoleRow.role_name == name))
        self.session.execute(delete(AuthzRoleRow).where(AuthzRoleRow.name == name))

    def roles_of(self, user: str) -> list[str]:
        query = (
            select(AuthzUserRoleRow.role_name)
            .where(AuthzUserRoleRow.user_name == user)
            .order_by(AuthzUserRoleRow.role_name)
        )
        return list(self.session.scalars(query))

    def users_of(self, role: str) -> list[str]:
        query = (
            select(AuthzUserRoleRow.user_name)
            .where(AuthzUserRoleRow.role_name == role)
            .order_by(AuthzUserRoleRow.user_name)
        )
        return list(self.session.scalars(query))

    def assign(self, user: str, role: str) -> None:
        if self.session.get(AuthzUserRoleRow, (user, role)) is None:
            self._add(AuthzUserRoleRow(user_name=user, role_name=role))

    def unassign(self, user: str, role: str) -> int:
        result = self.session.execute(
            delete(AuthzUserRoleRow).where(
                AuthzUserRoleRow.user_name == user, AuthzUserRoleRow.role_name == role
            )
        )
        return int(getattr(result, "rowcount", 0) or 0)

    def permissions_of(self, user: str) -> list[dict[str, Any]]:
        """Every permission of the user's roles (Druid's JSON), in one query."""
        query = (
            select(AuthzRoleRow.permissions)
            .join(AuthzUserRoleRow, AuthzUserRoleRow.role_name == AuthzRoleRow.name)
            .where(AuthzUserRoleRow.user_name == user)
        )
        return [p for permissions in self.session.scalars(query) for p in permissions]
