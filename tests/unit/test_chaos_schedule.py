"""The chaos harness's fault schedule is the seed's alone (bench/chaos.py)."""

from __future__ import annotations

from collections import Counter

from bench.chaos import HOLD_S, WEIGHTS, schedule


def test_a_seed_gives_the_same_faults_and_another_seed_others() -> None:
    kinds = list(WEIGHTS)
    first = schedule(7, 6, 120.0, kinds)
    assert first == schedule(7, 6, 120.0, kinds)
    assert first != schedule(8, 6, 120.0, kinds)
    assert [f.at for f in first] == sorted(f.at for f in first)
    assert all(0 <= f.at <= 120 for f in first)
    for fault in first:
        low, high = HOLD_S.get(fault.kind, (0.0, 0.0))
        assert low <= fault.hold <= high


def test_kinds_are_drawn_by_weight_and_only_those_asked_for() -> None:
    drawn = Counter(f.kind for seed in range(200) for f in schedule(seed, 4, 60.0, list(WEIGHTS)))
    assert set(drawn) == set(WEIGHTS)
    # task_kill weighs 3, broker_kill 1: over 800 draws the heavier is drawn clearly more often
    assert drawn["task_kill"] > 2 * drawn["broker_kill"]
    only = {f.kind for seed in range(50) for f in schedule(seed, 4, 60.0, ["handoff"])}
    assert only == {"handoff"}
