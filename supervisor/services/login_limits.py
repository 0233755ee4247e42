"""How fast wrong credentials may be tried: token buckets of failures, refilled at a steady
rate, refused with 429 and Retry-After before any password is hashed (a wrong try costs a
PBKDF2 of 10,000 iterations; an unlimited client spends a 2-core host's CPU on them).

A try from an address that logged in as its user lately (trusted) spends a bucket of that
address and user only. Any other try spends the address's bucket and the user name's: an
address that fails often is slowed, whoever it tries, and a user name tried from many
addresses is slowed too. So an attacker can slow a user's logins from new places while the
attack goes on, never lock the user out of where they work (nor other users out of the
attacker's address), and every limit lifts by itself once the failures stop. A right password
uses up nothing; limits are per overlord."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from supervisor.lru import Lru

log = logging.getLogger(__name__)
KEPT = 10_000  # buckets and trusted addresses kept at most (the least recently used go)


@dataclass(frozen=True)
class Rate:
    burst: float  # failures allowed at once
    per_s: float  # failures allowed each second after that


ADDRESS_RATE = Rate(burst=10, per_s=1.0)
USER_RATE = Rate(burst=60, per_s=1.0)
TRUSTED_S = 7 * 24 * 3600.0  # an address that logged in as a user is exempt this long


class _Bucket:
    __slots__ = ("at", "level")

    def __init__(self, level: float, at: float) -> None:
        self.level = level  # failures still allowed now
        self.at = at


class LoginLimits:
    def __init__(
        self,
        address_rate: Rate = ADDRESS_RATE,
        user_rate: Rate = USER_RATE,
        trusted_s: float = TRUSTED_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rates = {"address": address_rate, "user": user_rate, "trusted": address_rate}
        self.trusted_s = trusted_s
        self.monotonic = monotonic
        self._buckets: Lru[tuple[str, str], _Bucket] = Lru(KEPT)
        self._trusted: Lru[tuple[str, str], float] = Lru(KEPT)
        self._lock = threading.Lock()

    def wait_s(self, address: str, user: str | None) -> float:
        """Seconds until `address` may try credentials (for `user`, when a Basic header names
        one) again; 0 now."""
        with self._lock:
            now = self.monotonic()
            return max(self._wait(key, now) for key in self._keys(address, user, now))

    def failed(self, address: str, user: str | None) -> None:
        with self._lock:
            now = self.monotonic()
            for key in self._keys(address, user, now):
                self._spend(key, now)

    def _keys(self, address: str, user: str | None, now: float) -> list[tuple[str, str]]:
        if user is None:
            return [("address", address)]
        if self._is_trusted(address, user, now):
            return [("trusted", f"{user}@{address}")]
        return [("address", address), ("user", user)]

    def succeeded(self, address: str, user: str) -> None:
        with self._lock:
            self._trusted.put((address, user), self.monotonic() + self.trusted_s)

    def _is_trusted(self, address: str, user: str, now: float) -> bool:
        until = self._trusted.get((address, user))
        return until is not None and until > now

    def _level(self, key: tuple[str, str], now: float) -> _Bucket:
        rate = self.rates[key[0]]
        bucket = self._buckets.get(key)
        if bucket is None:
            return _Bucket(rate.burst, now)
        bucket.level = min(rate.burst, bucket.level + (now - bucket.at) * rate.per_s)
        bucket.at = now
        return bucket

    def _wait(self, key: tuple[str, str], now: float) -> float:
        bucket = self._level(key, now)
        return 0.0 if bucket.level >= 1 else (1 - bucket.level) / self.rates[key[0]].per_s

    def _spend(self, key: tuple[str, str], now: float) -> None:
        bucket = self._level(key, now)
        was = bucket.level
        bucket.level -= 1
        self._buckets.put(key, bucket)
        if was >= 1 > bucket.level:
            kind, name = key
            log.warning(
                "wrong credentials too often for %s %s: further tries are slowed to %g a second",
                kind,
                name,
                self.rates[kind].per_s,
            )


def retry_after(wait_s: float) -> str:
    """A Retry-After header's whole seconds, at least one."""
    return str(max(1, math.ceil(wait_s)))
