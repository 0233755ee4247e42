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


def test_entries_are_dropped_past_the_weight_and_a_heavy_one_is_not_kept() -> None:
    cache: Lru[str, str] = Lru(100, max_weight=10)
    cache.put("a", "aaaa", 4)
    cache.put("b", "bbbb", 4)
    cache.put("c", "cccc", 4)  # 12 > 10: "a" goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, "bbbb", "cccc")
    assert cache.weight == 8
    cache.put("b", "b", 1)  # a replaced entry's weight is given back
    assert cache.weight == 5
    cache.put("huge", "x" * 11, 11)
    assert cache.get("huge") is None and cache.weight == 5
    cache.discard("c")
    assert cache.weight == 1
