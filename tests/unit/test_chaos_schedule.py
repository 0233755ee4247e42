"""The chaos harness's fault schedule is the seed's alone (bench/chaos.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench.chaos import FIRST_SEED, HOLD_S, WEIGHTS, load, schedule, summary


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


def test_the_default_sweep_draws_every_kind_at_least_five_times() -> None:
    """Issue 24's bar, met by the seeds `make chaos` runs (50 from FIRST_SEED, 4 faults)."""
    drawn = Counter(
        f.kind
        for seed in range(FIRST_SEED, FIRST_SEED + 50)
        for f in schedule(seed, 4, 120.0, list(WEIGHTS))
    )
    assert min(drawn[kind] for kind in WEIGHTS) >= 5, drawn


def test_a_report_merges_sweeps_run_in_parts(tmp_path: Path) -> None:
    def run(seed: int, ok: bool) -> dict[str, object]:
        return {"seed": seed, "faults": [], "duplicates": 0 if ok else 2, "recovery_s": seed}

    (tmp_path / "a.json").write_text(json.dumps({"runs": [run(10, True), run(11, False)]}))
    (tmp_path / "b.json").write_text(json.dumps({"runs": [run(11, True), run(12, True)]}))
    outcomes = load([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert [(o.seed, o.ok) for o in outcomes] == [(10, True), (11, True), (12, True)]
    assert summary(outcomes).startswith("RATIO runs=3 ok=3 dupes=0 missing=0 stuck=0")
