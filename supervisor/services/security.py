"""Users, credentials, API tokens, roles and permissions: Druid's basic-security API, with
API tokens added. Answers and errors follow Druid's (a 400 naming what is wrong)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.db.security import SecurityRepository
from supervisor.errors import BadRequestError
from supervisor.model.access import SECURITY, Action, ResourceType, parse_permissions
from supervisor.services.authentication import new_token, set_password
from tasks.spec.names import has_control_characters

T = TypeVar("T")
MIN_PASSWORD = 8  # NIST SP 800-63B's least for a password a person chooses
MAX_PASSWORD = 1024


def _name(value: str, what: str) -> str:
    """A user, role or token name: 1 to 255 characters, no control characters and no '/' (it
    is a path segment); a user name no ':' either (HTTP Basic splits there)."""
    bad = has_control_characters(value) or "/" in value
    if not 0 < len(value) <= 255 or bad or (what == "userName" and ":" in value):
        extra = " or ':'" if what == "userName" else ""
        raise BadRequestError(
            f"{what}: must be 1 to 255 characters, without control characters, '/'{extra}",
            field=what,
        )
    return value


class SecurityService:
    def __init__(self, session: Session, clock: Clock, me: str = "") -> None:
        self.repo = SecurityRepository(session)
        self.clock = clock
        self.me = me  # who asks ("" with authentication off)

    # the one rule over every change: someone can still manage security

    def administrators(self) -> set[str]:
        """Users who can log in (a password or an API token) and hold CONFIG `security` WRITE:
        who can mend users and roles."""
        found = set()
        for user in self.repo.authz_names():
            login = self.repo.authn_user(user)
            if login is None or (login.iterations is None and not self.repo.tokens(user)):
                continue
            if any(
                p.allows(ResourceType.CONFIG, SECURITY, Action.WRITE)
                for p in parse_permissions(self.repo.permissions_of(user))
            ):
                found.add(user)
        return found

    def keeping_an_administrator(self, change: Callable[[], T]) -> T:
        """`change`, refused (and undone with its transaction) when it would leave no
        administrator where there was one: the last holder of the right to mend the others
        cannot be deleted, stripped of its role, or have that role's permission taken away."""
        self.repo.one_change_at_a_time()
        before = self.administrators()
        result = change()
        self.repo.session.flush()
        if before and not self.administrators():
            raise BadRequestError(
                "would leave no user who can manage security (CONFIG 'security' WRITE, with a "
                "password or a token): give another user that first",
                field="userName",
            )
        return result

    def _not_me(self, user: str) -> None:
        if self.me and user == self.me:
            raise BadRequestError(
                f"userName: [{user}] is who makes this request; another administrator deletes it",
                field="userName",
            )

    # authentication

    def _authn(self, user: str) -> Any:
        row = self.repo.authn_user(user)
        if row is None:
            raise BadRequestError(f"User [{user}] does not exist.", field="userName")
        return row

    def authn_users(self) -> list[str]:
        return self.repo.authn_names()

    def authn_user(self, user: str) -> dict[str, Any]:
        row = self._authn(user)
        credentials = None if row.iterations is None else {"iterations": row.iterations}
        return {"name": row.name, "credentials": credentials}

    def create_authn_user(self, user: str) -> None:
        if self.repo.authn_user(_name(user, "userName")) is not None:
            raise BadRequestError(f"User [{user}] already exists.", field="userName")
        self.repo.add_authn_user(user, self.clock())

    def delete_authn_user(self, user: str) -> None:
        self._authn(user)
        self._not_me(user)
        self.repo.delete_authn_user(user)

    def set_credentials(self, user: str, body: Any) -> None:
        row = self._authn(user)
        password = body.get("password") if isinstance(body, dict) else None
        if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
            raise BadRequestError(
                f"password: must be a string of {MIN_PASSWORD} to {MAX_PASSWORD} characters",
                field="password",
            )
        set_password(row, password)

    def tokens(self, user: str) -> list[dict[str, str]]:
        self._authn(user)
        return [
            {"name": row.name, "createdAt": druid_timestamp(row.created_at)}
            for row in self.repo.tokens(user)
        ]

    def create_token(self, user: str, name: str) -> dict[str, str]:
        self._authn(user)
        _name(name, "tokenName")
        if any(row.name == name for row in self.repo.tokens(user)):
            raise BadRequestError(f"Token [{name}] of [{user}] already exists.", field="tokenName")
        token, digest = new_token()
        self.repo.add_token(user, name, digest, self.clock())
        return {"name": name, "token": token}

    def delete_token(self, user: str, name: str) -> None:
        if not self.repo.delete_token(user, name):
            raise BadRequestError(f"Token [{name}] of [{user}] does not exist.", field="tokenName")

    # authorization

    def _authz(self, user: str) -> None:
        if self.repo.authz_user(user) is None:
            raise BadRequestError(f"User [{user}] does not exist.", field="userName")

    def _role(self, role: str) -> Any:
        row = self.repo.role(role)
        if row is None:
            raise BadRequestError(f"Role [{role}] does not exist.", field="roleName")
        return row

    def authz_users(self) -> list[str]:
        return self.repo.authz_names()

    def authz_user(self, user: str, full: bool, simple: bool) -> dict[str, Any]:
        self._authz(user)
        roles = self.repo.roles_of(user)
        if not full:
            return {"name": user, "roles": roles}
        return {"name": user, "roles": [self.role(r, False, simple) for r in roles]}

    def create_authz_user(self, user: str) -> None:
        if self.repo.authz_user(_name(user, "userName")) is not None:
            raise BadRequestError(f"User [{user}] already exists.", field="userName")
        self.repo.add_authz_user(user)

    def delete_authz_user(self, user: str) -> None:
        self._authz(user)
        self._not_me(user)
        self.repo.delete_authz_user(user)

    def roles(self) -> list[str]:
        return self.repo.role_names()

    def role(self, role: str, full: bool, simple: bool) -> dict[str, Any]:
        row = self._role(role)
        permissions = [
            p if simple else {"resourceAction": p, "resourceNamePattern": p["resource"]["name"]}
            for p in row.permissions
        ]
        answer: dict[str, Any] = {"name": role}
        if full or simple:
            answer["users"] = self.repo.users_of(role) if full else None
        answer["permissions"] = permissions
        return answer

    def create_role(self, role: str) -> None:
        if self.repo.role(_name(role, "roleName")) is not None:
            raise BadRequestError(f"Role [{role}] already exists.", field="roleName")
        self.repo.add_role(role, [])

    def delete_role(self, role: str) -> None:
        self._role(role)
        self.repo.delete_role(role)

    def assign(self, user: str, role: str) -> None:
        self._authz(user)
        self._role(role)
        if role in self.repo.roles_of(user):
            raise BadRequestError(f"User [{user}] already has role [{role}].", field="roleName")
        self.repo.assign(user, role)

    def unassign(self, user: str, role: str) -> None:
        self._authz(user)
        self._role(role)
        if not self.repo.unassign(user, role):
            raise BadRequestError(f"User [{user}] does not have role [{role}].", field="roleName")

    def set_permissions(self, role: str, body: Any) -> None:
        row = self._role(role)
        row.permissions = [p.to_json() for p in parse_permissions(body)]
