"""supervisor.heap: what `serve` does to the garbage collector before serving."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from supervisor import heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_startup_objects_and_collects_the_young_less_often(
    restored_gc: None,
) -> None:
    built_at_startup = [{"n": n} for n in range(1000)]  # containers: tracked by the collector
    _, middle, old = gc.get_threshold()

    heap.settle(10_000)

    assert gc.get_freeze_count() >= len(built_at_startup)
    assert gc.get_threshold() == (10_000, middle, old)
    assert gc.get_count()[0] < 10_000  # a collection ran first: the young start empty


def test_the_service_setting_bounds_the_threshold() -> None:
    from pydantic import ValidationError

    from supervisor.settings import Settings

    assert Settings().gc_young_threshold == 10_000
    with pytest.raises(ValidationError):
        Settings(gc_young_threshold=0)  # 0 would switch the collector off
