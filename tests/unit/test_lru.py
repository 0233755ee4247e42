"""The bounded map behind the caches: the least recently used entry goes first, and with an
idle bound, an entry unused for longer goes at the next put."""

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


def test_a_put_drops_the_entries_unused_for_longer_than_the_idle_bound() -> None:
    now = [0.0]
    cache: Lru[str, int] = Lru(100, max_weight=100, max_idle_s=10.0, clock=lambda: now[0])
    cache.put("ended", 1, 5)
    cache.put("running", 2, 5)
    now[0] = 8.0
    assert cache.get("running") == 2  # used at 8: idle from then on
    now[0] = 15.0
    cache.put("new", 3, 5)  # "ended" was last used 15 s ago, "running" 7 s ago
    assert (cache.get("ended"), cache.get("running"), cache.get("new")) == (None, 2, 3)
    assert len(cache) == 2 and cache.weight == 10
    now[0] = 100.0
    cache.put("later", 4)  # everything before it has been idle for over 10 s
    assert len(cache) == 1 and cache.weight == 0 and cache.get("later") == 4
