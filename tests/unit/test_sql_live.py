"""supervisor/services/sql_live.py: which held rows a query reads with the published table,
so that across a handoff no offset is read twice or skipped."""

from __future__ import annotations

import pytest

from supervisor.clients.held import HeldRows
from supervisor.clients.task_api import TaskApiError
from supervisor.db.models import TaskRow
from supervisor.services.sql_live import Stale, _covering, _first_answer


def _task(task_id: str, group: int = 0) -> TaskRow:
    return TaskRow(id=task_id, supervisor_id="wiki", group_id=group)


def _held(start: dict[str, int], end: dict[str, int], files: int = 1) -> HeldRows:
    return HeldRows(start, end, [f"f{i}.parquet" for i in range(files)], "local")


def test_generations_that_follow_the_committed_offsets_are_read_gaps_between_them_too() -> None:
    old, new = _task("old"), _task("new")
    held = [(old, _held({"0": 100}, {"0": 150})), (new, _held({"0": 200}, {"0": 260}))]
    # 150..199: the old generation reads to 200 still, the new one began there: nobody's yet
    covering, bad = _covering(held, {"0": 100}, tolerant=False)
    assert [task.id for task, _ in covering] == ["old", "new"] and bad == []
    empty = [(new, _held({"0": 100}, {"0": 100}, files=0))]
    assert _covering(empty, {"0": 100}, tolerant=False)[1] == []


@pytest.mark.parametrize(
    ("committed", "held"),
    [
        ({"0": 150}, [("old", {"0": 100}, {"0": 150}), ("new", {"0": 150}, {"0": 170})]),
        ({"0": 100}, [("new", {"0": 150}, {"0": 170})]),
        ({"0": 100}, [("a", {"0": 100}, {"0": 170}), ("b", {"0": 160}, {"0": 180})]),
    ],
    ids=["read-before-the-committed", "a-gap-after-the-committed", "two-groups-overlap"],
)
def test_a_publish_under_the_read_is_stale_and_on_the_last_try_lacking(
    committed: dict[str, int], held: list[tuple[str, dict[str, int], dict[str, int]]]
) -> None:
    answers = [(_task(task_id), _held(start, end)) for task_id, start, end in held]
    with pytest.raises(Stale) as stale:
        _covering(answers, committed, tolerant=False)
    assert stale.value.status == 503
    covering, bad = _covering(answers, committed, tolerant=True)
    assert bad and {t.id for t, _ in covering}.isdisjoint({t.id for t in bad})


def test_replicas_are_asked_in_order_until_one_answers_and_a_409_is_stale() -> None:
    asked: list[str] = []

    def asker(task: TaskRow, since: dict[str, int]) -> HeldRows:
        asked.append(task.id)
        if task.id == "a":
            raise TaskApiError(None, "connection refused")
        if task.id == "c":
            raise TaskApiError(409, "persist gone")
        return _held(since, {"0": 9})

    answer, reason, stale = _first_answer([_task("a"), _task("b")], {"wiki": {"0": 5}}, asker)
    assert asked == ["a", "b"] and answer is not None and answer.start == {"0": 5} and not stale
    answer, reason, stale = _first_answer([_task("c"), _task("b")], {}, asker)
    assert answer is None and stale and "persist gone" in reason
    answer, reason, stale = _first_answer([_task("a")], {}, asker)
    assert answer is None and not stale and "did not answer" in reason
