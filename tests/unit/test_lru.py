"""The bounded map behind the parsed-spec caches: the least recently used entry goes first."""

from __future__ import annotations

from supervisor.lru import Lru


def test_the_least_recently_used_entry_is_dropped_past_the_size() -> None:
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now more recent than "b"
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.put("a", 10)  # replacing keeps the size
    cache.put("d", 4)
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == (10, None, 4)
