"""A small thread-safe map that keeps its most recently used entries, bounded by count and,
when told each entry's weight (its bytes), by their sum, and when told so, by how long an entry
may go unused."""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
CACHE_BYTES = 64 * 1024 * 1024  # what each cache of spec versions may hold, about
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most `size` entries, and entries of at most `max_weight` in all (the weights given
    to `put`); a get or a put makes an entry the most recent, and a put past either bound
    drops the least recent. An entry heavier than `max_weight` alone is not kept. With
    `max_idle_s`, a put also drops the entries no get or put has used for that long (a cache
    whose keys come and go, such as running tasks' endpoints, holds what is in use now rather
    than filling up to `size` with what was once)."""

    def __init__(
        self,
        size: int,
        max_weight: int | None = None,
        name: str = "",
        max_idle_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.size = size
        self.max_weight = max_weight
        self.max_idle_s = max_idle_s
        self.weight = 0
        self.name = name
        self._clock = clock
        # each entry: its value, its weight, when it was last used (in recency order)
        self._entries: OrderedDict[K, tuple[V, int, float]] = OrderedDict()
        self._lock = threading.Lock()
        if name:
            _NAMED.add(self)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            if self.max_idle_s is not None:
                self._entries[key] = (entry[0], entry[1], self._clock())
            return entry[0]

    def put(self, key: K, value: V, weight: int = 0) -> None:
        with self._lock:
            self._pop(key)
            if self.max_weight is not None and weight > self.max_weight:
                return
            now = self._clock() if self.max_idle_s is not None else 0.0
            self._entries[key] = (value, weight, now)
            self.weight += weight
            while len(self._entries) > self.size or (
                self.max_weight is not None and self.weight > self.max_weight
            ):
                self.weight -= self._entries.popitem(last=False)[1][1]
            if self.max_idle_s is not None:
                while (oldest := next(iter(self._entries.values())))[2] < now - self.max_idle_s:
                    self._entries.popitem(last=False)
                    self.weight -= oldest[1]

    def discard(self, key: K) -> None:
        with self._lock:
            self._pop(key)

    def _pop(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.weight -= entry[1]


_NAMED: weakref.WeakSet[Lru[Any, Any]] = weakref.WeakSet()


def named() -> list[tuple[str, int, int]]:
    """Each named cache alive: its name, entries and weight (for the memory report)."""
    return sorted((cache.name, len(cache), cache.weight) for cache in list(_NAMED))


def json_weight(value: object) -> int:
    """An entry's weight for a cache: the length of its JSON text, which a decoded or parsed
    copy takes a few times over in memory."""
    return len(json.dumps(value, separators=(",", ":"), default=str))
