"""Who a request comes from: HTTP Basic against PBKDF2 hashes in the metadata DB (Druid's
basic authenticator: PBKDF2 with HMAC-SHA512, 10,000 iterations, a random salt per user) or
a Bearer API token (SHA-256 of 32 random bytes). Verified credentials and users' permissions
are kept briefly in memory, as Druid's authenticator caches them: hashing on every request
would cost milliseconds of CPU each."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from supervisor.db.engine import SessionFactory
from supervisor.db.models import AuthnUserRow
from supervisor.db.security import SecurityRepository
from supervisor.errors import Raced
from supervisor.lru import Lru
from supervisor.model.access import ALL_PERMISSIONS, Identity, parse_permissions
from supervisor.services.login_limits import LoginLimits
from tasks.spec.names import has_control_characters

log = logging.getLogger(__name__)
ITERATIONS = 10_000  # Druid's default credentialIterations
SALT_BYTES = 32
TOKEN_PREFIX = "sg_"
ADMIN = "admin"  # Druid's initial admin user and role
KEPT = 10_000  # verified credentials and users' permissions kept at most


def password_hash(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, dklen=64)


def set_password(row: AuthnUserRow, password: str) -> None:
    salt = secrets.token_bytes(SALT_BYTES)
    row.salt = base64.b64encode(salt).decode()
    row.password_hash = base64.b64encode(password_hash(password, salt, ITERATIONS)).decode()
    row.iterations = ITERATIONS


def _matches(row: AuthnUserRow | None, password: str) -> bool:
    if row is None or row.password_hash is None or row.salt is None or row.iterations is None:
        password_hash(password, b"\0" * SALT_BYTES, ITERATIONS)  # as long as a real check
        return False
    computed = password_hash(password, base64.b64decode(row.salt), row.iterations)
    return hmac.compare_digest(computed, base64.b64decode(row.password_hash))


def basic_user(authorization: str | None) -> str | None:
    """The user name an HTTP Basic header gives (None: none, or not Basic)."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, _ = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return user[:255] if sep and user else None


def new_token() -> tuple[str, str]:
    """(the token, its digest): the token is shown once, the digest kept."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, token_digest(token)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class _Known:
    user: str
    until: float
    generation: int


class Authenticator:
    """Identifies requests by their Authorization header. `forget()` after a change of users,
    credentials, tokens or roles made here; other overlords see it within `cache_s`."""

    def __init__(
        self,
        sessions: SessionFactory,
        cache_s: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessions = sessions
        self.cache_s = cache_s
        self.monotonic = monotonic
        self._credentials: Lru[bytes, _Known] = Lru(KEPT)
        self._identities: Lru[str, tuple[Identity, float, int]] = Lru(KEPT)
        self._generation = 0
        self._lock = threading.Lock()
        self.limits = LoginLimits(monotonic=monotonic)

    def forget(self) -> None:
        with self._lock:
            self._generation += 1

    def known(self, authorization: str | None) -> Identity | None:
        """The identity behind an Authorization header when both its credentials and its
        permissions are in memory (None: ask `identify`): no database, no hashing beyond a
        SHA-256, so the event loop can answer it without a hop to a thread."""
        if not authorization:
            return None
        scheme, _, value = authorization.strip().partition(" ")
        key = self._key(scheme.lower(), value.strip())
        user = None if key is None else self._cached(key)
        if user is None:
            return None
        hit = self._identities.get(user)
        if hit is None or hit[1] < self.monotonic() or hit[2] != self._generation:
            return None
        return hit[0]

    def _key(self, scheme: str, value: str) -> bytes | None:
        if scheme == "bearer":
            return (
                b"bearer\0" + token_digest(value).encode()
                if value.startswith(TOKEN_PREFIX)
                else None
            )
        if scheme != "basic":
            return None
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        user, _, password = decoded.partition(":")
        return hashlib.sha256(b"basic\0" + user.encode() + b"\0" + password.encode()).digest()

    def identify(self, authorization: str | None) -> Identity | None:
        """The identity behind an Authorization header (None: none given, or not valid)."""
        if not authorization:
            return None
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic":
            user = self._basic(value)
        elif scheme.lower() == "bearer":
            user = self._bearer(value)
        else:
            return None
        return None if user is None else self._identity(user)

    def _cached(self, key: bytes) -> str | None:
        known = self._credentials.get(key)
        if known is None or known.until < self.monotonic() or known.generation != self._generation:
            return None
        return known.user

    def _remember(self, key: bytes, user: str, generation: int) -> None:
        self._credentials.put(key, _Known(user, self.monotonic() + self.cache_s, generation))

    def _basic(self, value: str) -> str | None:
        try:
            user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        if not sep or not user or has_control_characters(user + password):
            return None  # no stored user or password has control characters

        def check(session: Session) -> str | None:
            row = SecurityRepository(session).authn_user(user)
            return user if _matches(row, password) else None

        return self._verified(self._key("basic", value), check)

    def _bearer(self, token: str) -> str | None:
        def check(session: Session) -> str | None:
            row = SecurityRepository(session).token(token_digest(token))
            return None if row is None else row.user_name

        return self._verified(self._key("bearer", token), check)

    def _verified(self, key: bytes | None, check: Callable[[Session], str | None]) -> str | None:
        """The user of credentials: from memory, else by `check` in the metadata DB (then
        remembered)."""
        if key is None:
            return None
        cached = self._cached(key)
        if cached is not None:
            return cached
        generation = self._generation  # read before the DB: a change meanwhile drops it
        with self.sessions() as session:
            user = check(session)
        if user is not None:
            self._remember(key, user, generation)
        return user

    def _identity(self, user: str) -> Identity:
        hit = self._identities.get(user)
        if hit is not None and hit[1] >= self.monotonic() and hit[2] == self._generation:
            return hit[0]
        generation = self._generation
        with self.sessions() as session:
            raw = SecurityRepository(session).permissions_of(user)
        try:
            permissions = tuple(parse_permissions(raw))
        except ValueError:  # stored by an older version or by hand: refuse, do not fail
            log.warning("user %s: a role holds permissions that do not parse; none used", user)
            permissions = ()
        identity = Identity(user, permissions)
        self._identities.put(
            user, (identity, self.monotonic() + min(self.cache_s, 5.0), generation)
        )
        return identity


def ensure_admin(sessions: SessionFactory, password: str | None, now: datetime) -> str | None:
    """On a metadata DB with no users: the `admin` user (password `password`, else a new one,
    returned to be shown once) with the `admin` role, which may do everything. Another
    overlord doing the same at once is fine: one of them makes it."""
    with sessions() as session:
        repo = SecurityRepository(session)
        if repo.authn_count() > 0:
            return None
        generated = None if password else secrets.token_urlsafe(18)
        try:
            set_password(repo.add_authn_user(ADMIN, now), password or str(generated))
            if repo.authz_user(ADMIN) is None:
                repo.add_authz_user(ADMIN)
            if repo.role(ADMIN) is None:
                repo.add_role(ADMIN, [p.to_json() for p in ALL_PERMISSIONS])
            repo.assign(ADMIN, ADMIN)
            session.commit()
        except Raced:
            return None
    log.info("created the %s user with the %s role", ADMIN, ADMIN)
    return generated
