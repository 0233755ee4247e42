"""Exactly-once under faults (`pytest -m chaos`, outside `make test`): seeded runs of
bench/chaos.py on the whole real stack, each of which must end with every committed record
published once, no aborted one, and nothing stuck. `make chaos` runs the fifty."""

from __future__ import annotations

import pytest

from bench.chaos import WEIGHTS, main


@pytest.mark.chaos
@pytest.mark.timeout(3 * 3600)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_seeded_run_of_faults_publishes_every_record_once(seed: int) -> None:
    assert main(["--seed", str(seed), "--runs", "1"]) == 0


@pytest.mark.chaos
@pytest.mark.timeout(3 * 3600)
@pytest.mark.parametrize("kind", list(WEIGHTS))
def test_each_fault_kind_alone_publishes_every_record_once(kind: str) -> None:
    assert main(["--seed", "100", "--runs", "1", "--faults", "2", "--kinds", kind]) == 0
