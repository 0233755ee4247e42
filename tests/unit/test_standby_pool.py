"""The standby pool's bookkeeping, with `sleep` processes standing in for Spark drivers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from supervisor.runner.standby import StandbyPool


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pool(tmp_path: Path) -> Any:
    clock = Clock()
    spawned: list[subprocess.Popen[bytes]] = []

    def spawn(slot: Path, _token: str) -> Any:
        process = subprocess.Popen(["sleep", "60"], start_new_session=True)
        spawned.append(process)
        return process, 1, slot / "task.log"

    standbys = StandbyPool(tmp_path, spawn, limit=3, idle_s=30, clock=clock)
    yield standbys, clock, spawned
    standbys.stop_all()


def test_reservations_start_standbys_up_to_the_limit(pool: Any) -> None:
    standbys, _, spawned = pool
    assert standbys.reserve(("wiki", 0), 2, '{"p": 1}', ttl_s=60) == 2
    assert standbys.reserve(("wiki", 0), 2, '{"p": 1}', ttl_s=60) == 0  # renewed, none more
    assert standbys.reserve(("wiki", 1), 2, '{"p": 1}', ttl_s=60) == 1  # the limit is 3
    assert len(spawned) == 3
    assert sorted((s.supervisor, s.group) for s in standbys.describe()) == [
        ("wiki", 0),
        ("wiki", 0),
        ("wiki", 1),
    ]
    slots = [Path(s.slot) for s in standbys.standbys]
    assert all((slot / "warm-payload.json").read_text() == '{"p": 1}' for slot in slots)


def test_take_prefers_the_groups_own_and_consumes_its_reservation(pool: Any) -> None:
    standbys, clock, _ = pool
    standbys.reserve(("wiki", 0), 1, "{}", ttl_s=60)
    standbys.reserve(("wiki", 1), 1, "{}", ttl_s=60)
    taken = standbys.take(("wiki", 1))
    assert taken is not None and taken.key == ("wiki", 1)
    assert standbys.take(("other", 0)) is None  # group 0 still wants its standby
    standbys.tick()  # group 1's reservation was used up: nothing restarts for it
    assert [s.key for s in standbys.standbys] == [("wiki", 0)]
    clock.now += 61  # group 0's reservation lapses; anyone may take the standby now
    other = standbys.take(("other", 0))
    assert other is not None and other.key == ("wiki", 0)
    for standby in (taken, other):
        standby.process.kill()
        standby.process.wait()


def test_unwanted_standbys_stop_after_idle_and_dead_ones_are_forgotten(pool: Any) -> None:
    standbys, clock, spawned = pool
    standbys.reserve(("wiki", 0), 2, "{}", ttl_s=10)
    spawned[0].kill()
    spawned[0].wait()
    standbys.tick()  # the dead one is replaced while the reservation holds
    assert len(standbys.standbys) == 2 and len(spawned) == 3
    clock.now += 11
    standbys.tick()  # lapsed: unwanted from now on
    clock.now += 30
    standbys.tick()  # not for more than idle_s yet
    assert len(standbys.standbys) == 2
    clock.now += 1
    standbys.tick()
    assert standbys.standbys == []
    assert all(p.poll() is not None for p in spawned)
