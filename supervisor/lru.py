"""A small thread-safe map that keeps its most recently used entries, bounded by count and,
when told each entry's weight (its bytes), by their sum."""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from typing import Any, Generic, TypeVar

K = TypeVar("K")
CACHE_BYTES = 64 * 1024 * 1024  # what each cache of spec versions may hold, about
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most `size` entries, and entries of at most `max_weight` in all (the weights given
    to `put`); a get or a put makes an entry the most recent, and a put past either bound
    drops the least recent. An entry heavier than `max_weight` alone is not kept."""

    def __init__(self, size: int, max_weight: int | None = None, name: str = "") -> None:
        self.size = size
        self.max_weight = max_weight
        self.weight = 0
        self.name = name
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
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
            return entry[0]

    def put(self, key: K, value: V, weight: int = 0) -> None:
        with self._lock:
            self._pop(key)
            if self.max_weight is not None and weight > self.max_weight:
                return
            self._entries[key] = (value, weight)
            self.weight += weight
            while len(self._entries) > self.size or (
                self.max_weight is not None and self.weight > self.max_weight
            ):
                self.weight -= self._entries.popitem(last=False)[1][1]

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
