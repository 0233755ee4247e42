"""How a pass merges the intents it finds: one request per thing asked."""

from __future__ import annotations

from typing import Any

from supervisor.controller.requests import Pending, merge
from supervisor.db.intents import IntentKind
from supervisor.db.models import IntentRow


def row(kind: IntentKind, payload: dict[str, Any], task_id: str | None = None) -> IntentRow:
    return IntentRow(
        owner="s", kind=str(kind), payload=payload, task_id=task_id, author="", comment=""
    )


def test_handoffs_merge_by_group_and_a_full_restart_covers_named_groups() -> None:
    rows = [
        row(IntentKind.HANDOFF, {"group": 1}),
        row(IntentKind.HANDOFF, {"group": 0}),
        row(IntentKind.HANDOFF, {"group": 1}),
        row(IntentKind.RESTART, {"groups": [2]}),
        row(IntentKind.RESTART, {"groups": None}),
        row(IntentKind.RESTART, {"groups": [3]}),
    ]
    pending = merge(rows)
    assert {g: len(rs) for g, rs in pending.handoffs.items()} == {1: 2, 0: 1}
    assert pending.restart_groups is None
    assert pending.restarts == rows[3:]
    assert pending != Pending()


def test_named_restarts_add_up_and_the_newest_checkpoint_of_a_task_wins() -> None:
    rows = [
        row(IntentKind.RESTART, {"groups": [2]}),
        row(IntentKind.RESTART, {"groups": [0, 2]}),
        row(IntentKind.CHECKPOINT, {"start": {"0": 5}}, "t1"),
        row(IntentKind.CHECKPOINT, {"start": {"0": 9}}, "t1"),
        row(IntentKind.SHUTDOWN, {}, "t2"),
        row(IntentKind.SHUTDOWN, {}, "t2"),
    ]
    pending = merge(rows)
    assert pending.restart_groups == frozenset({0, 2})
    start, asking = pending.checkpoints["t1"]
    assert (start, asking) == ({"0": 9}, rows[2:4])
    assert pending.shutdowns == {"t2": rows[4:]}
    assert merge([]) == Pending()


def test_an_intent_is_stored_as_its_kind_and_payload_and_read_back_as_its_model() -> None:
    from pydantic import ValidationError

    from supervisor.db.intents import Checkpoint, Handoff, Restart, Shutdown, intent_of

    for intent, payload in [
        (Handoff(group=2), {"group": 2}),
        (Restart(groups=None), {"groups": None}),
        (Restart(groups=[0, 3]), {"groups": [0, 3]}),
        (Checkpoint(start={"0": 5}), {"start": {"0": 5}}),
        (Shutdown(), {}),
    ]:
        stored = intent.model_dump(mode="json", exclude={"kind"})
        assert stored == payload
        assert intent_of(row(intent.kind, stored)) == intent
    assert intent_of(row(IntentKind.RESTART, {})) == Restart(groups=None)  # every group
    assert (
        intent_of(IntentRow(owner="s", kind="compact", payload={}, author="", comment="")) is None
    )
    try:
        intent_of(row(IntentKind.HANDOFF, {"groups": [1]}))
    except ValidationError as exc:
        assert "group" in str(exc)
    else:
        raise AssertionError("a handoff without its group was read")
