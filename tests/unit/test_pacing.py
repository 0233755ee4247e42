"""A supervisor's pace (supervisor/controller/pacing.py): periodic passes at the supervisor's
phase, deadlines first, the answers after full and light passes, and the rule for a light
pass."""

from __future__ import annotations

import pytest

from supervisor.controller.pacing import (
    ACTED_S,
    Pace,
    RequeueAfter,
    checkpoints_only,
    light,
)
from supervisor.controller.requests import Pending
from supervisor.db.models import IntentRow

ROW = IntentRow(owner="s", kind="checkpoint", task_id="t", payload={})
CHECKPOINT = Pending(checkpoints={"t": ({"0": 1}, [ROW])})
HANDOFF_TOO = Pending(checkpoints={"t": ({"0": 1}, [ROW])}, handoffs={0: [ROW]})


def test_the_first_periodic_pass_falls_at_the_phase_and_then_every_period() -> None:
    pace = Pace(phase=0.25, period_s=10.0)
    assert pace.until_due(100.0) == 2.5
    assert pace.until_due(102.5) == 10.0  # due now: the next one is a period on
    assert pace.until_due(104.0) == 8.5


def test_a_deadline_before_the_periodic_pass_comes_first() -> None:
    pace = Pace(phase=1.0, period_s=30.0)
    pace.within(0.0, 2.0)
    assert pace.until_due(0.0) == 2.0
    pace.within(0.0, 5.0)  # a later one does not move it
    assert pace.deadline == 2.0


def test_a_shorter_period_moves_the_periodic_pass_in() -> None:
    pace = Pace(phase=0.5, period_s=30.0)
    assert pace.until_due(0.0) == 15.0
    pace.period_s = 4.0
    assert pace.until_due(0.0) == 2.0


def test_phases_are_spread_and_fixed_per_supervisor() -> None:
    phases = {Pace.of(f"s{i}").phase for i in range(200)}
    assert len(phases) > 150 and all(0 < p <= 1 for p in phases)
    assert Pace.of("wiki").phase == Pace.of("wiki").phase


def test_after_a_full_pass() -> None:
    pace = Pace(phase=0.5, period_s=10.0)
    assert pace.after_full(0.0, acted=False, rolled=True) == RequeueAfter(0.0, first=True)
    assert pace.after_full(0.0, acted=True, rolled=False) == RequeueAfter(ACTED_S)
    assert pace.full_at == ACTED_S
    assert pace.after_full(0.0, acted=False, rolled=False) == RequeueAfter(5.0)
    assert pace.full_at == 5.0


def test_a_light_pass_leaves_the_full_one_where_it_was() -> None:
    pace = Pace(phase=0.5, period_s=10.0)
    pace.after_full(0.0, acted=False, rolled=False)  # full at 5.0
    assert pace.after_light(1.0) == RequeueAfter(4.0)
    assert pace.after_light(6.0) == RequeueAfter(0.0)


@pytest.mark.parametrize(
    ("stands", "full_at", "pending", "expected"),
    [
        (True, 10.0, CHECKPOINT, True),
        (False, 10.0, CHECKPOINT, False),  # something the snapshot holds changed
        (True, 1.0, CHECKPOINT, False),  # the full pass is due
        (True, None, CHECKPOINT, False),  # no full pass yet (or the last one failed)
        (True, 10.0, HANDOFF_TOO, False),  # more than checkpoints asked
        (True, 10.0, Pending(), False),  # nothing asked
    ],
)
def test_the_light_pass_rule(
    stands: bool, full_at: float | None, pending: Pending, expected: bool
) -> None:
    pace = Pace(phase=1.0, full_at=full_at)
    assert light(pace, 5.0, stands, pending) is expected


def test_checkpoints_only() -> None:
    assert checkpoints_only(CHECKPOINT) and not checkpoints_only(HANDOFF_TOO)
    assert not checkpoints_only(Pending())
