"""The cluster's compaction config (supervisor/model/compaction_slots.py): Druid's task slots
for compaction (a share of the task hosts' slots, at most a maximum, at least one) and its
priority datasource."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from supervisor.db.models import WorkerRow
from supervisor.model.compaction_slots import (
    ClusterCompaction,
    answer,
    as_dict,
    parse_cluster,
    stored,
    task_slots,
)
from supervisor.model.retention import RuleError


@pytest.mark.parametrize(
    ("config", "capacity", "slots"),
    [
        (ClusterCompaction(), None, 2),  # no task hosts: the operator's maximum
        (ClusterCompaction(), 44, 2),  # 4 by the ratio, at most the default 2
        (ClusterCompaction(max_slots=10), 44, 4),  # Druid's: int(44 * 0.1)
        (ClusterCompaction(ratio=0.5, max_slots=6), 44, 6),
        (ClusterCompaction(max_slots=10), 4, 1),  # int(0.4) = 0: always one
        (ClusterCompaction(ratio=0.0, max_slots=0), 100, 1),
        (ClusterCompaction(ratio=1.0, max_slots=100), 0, 1),  # every host disabled
        (ClusterCompaction(max_slots=5), None, 5),
        (ClusterCompaction(max_slots=0), None, 1),
    ],
)
def test_compaction_takes_a_share_of_the_task_slots_at_most_its_maximum_at_least_one(
    config: ClusterCompaction, capacity: int | None, slots: int
) -> None:
    assert task_slots(config, capacity, default_max=2) == slots


def test_an_update_changes_the_fields_it_gives_and_keeps_the_others() -> None:
    first = parse_cluster({"compactionTaskSlotRatio": 0.5, "maxCompactionTaskSlots": 7})
    assert (first.ratio, first.max_slots, first.priority) == (0.5, 7, None)
    policy = {"type": "newestSegmentFirst", "priorityDatasource": "wiki"}
    second = parse_cluster({"compactionPolicy": policy, "useSupervisors": True}, first)
    assert (second.ratio, second.max_slots, second.priority) == (0.5, 7, "wiki")
    assert second.use_supervisors is True
    assert stored(as_dict(second)) == second  # what is stored reads back the same
    assert stored(None) == ClusterCompaction()
    shown = answer(second, default_max=2)
    assert shown["maxCompactionTaskSlots"] == 7 and shown["compactionTaskSlotRatio"] == 0.5
    assert shown["compactionPolicy"] == policy and shown["engine"] == "native"
    assert answer(ClusterCompaction(), default_max=3)["maxCompactionTaskSlots"] == 3
    # no policy: back to Druid's own, without a priority
    assert parse_cluster({"compactionPolicy": None}, second).priority is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([], "body"),
        ({"slots": 2}, "slots"),
        ({"compactionTaskSlotRatio": 1.5}, "compactionTaskSlotRatio"),
        ({"compactionTaskSlotRatio": -0.1}, "compactionTaskSlotRatio"),
        ({"compactionTaskSlotRatio": "0.5"}, "compactionTaskSlotRatio"),
        ({"compactionTaskSlotRatio": True}, "compactionTaskSlotRatio"),
        ({"compactionTaskSlotRatio": float("nan")}, "compactionTaskSlotRatio"),
        ({"maxCompactionTaskSlots": -1}, "maxCompactionTaskSlots"),
        ({"maxCompactionTaskSlots": 2.5}, "maxCompactionTaskSlots"),
        ({"maxCompactionTaskSlots": 2**31}, "maxCompactionTaskSlots"),
        ({"useAutoScaleSlots": True}, "useAutoScaleSlots"),
        ({"engine": "msq"}, "engine"),
        ({"useSupervisors": "yes"}, "useSupervisors"),
        ({"compactionPolicy": "newest"}, "compactionPolicy"),
        ({"compactionPolicy": {"type": "oldestFirst"}}, "compactionPolicy.type"),
        ({"compactionPolicy": {"priorityDatasource": ""}}, "compactionPolicy.priorityDatasource"),
        ({"compactionPolicy": {"type": "newestSegmentFirst", "x": 1}}, "compactionPolicy.x"),
    ],
)
def test_a_bad_cluster_config_is_refused_naming_its_field(raw: Any, field: str) -> None:
    with pytest.raises(RuleError) as refused:
        parse_cluster(raw)
    assert refused.value.field == field


def test_the_priority_datasource_is_given_its_turn_first_every_run() -> None:
    from supervisor.services.compaction import CompactionDuty

    duty: Any = CompactionDuty(None, None, None, None, None, None, 10)  # type: ignore[arg-type]
    configs: dict[str, dict[str, Any]] = {name: {} for name in ("c", "a", "b", "d")}
    duty.last = "a"
    assert [name for name, _ in duty._in_turn(configs, "d")] == ["d", "b", "c", "a"]
    assert [name for name, _ in duty._in_turn(configs, "gone")] == ["b", "c", "d", "a"]


def test_the_task_slots_are_those_of_the_hosts_heard_from_and_enabled(tmp_path: Any) -> None:
    from supervisor.db.engine import make_engine, migrate, session_factory
    from supervisor.db.workers import WorkerRepository

    engine = make_engine(f"sqlite:///{tmp_path / 'meta.db'}")
    migrate(engine)
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    timeout = timedelta(seconds=30)
    with session_factory(engine)() as session:
        workers = WorkerRepository(session)
        assert workers.capacity(now, timeout) is None  # no host: the overlord's own
        for host, capacity, enabled, age_s in (
            ("a:1", 10, True, 5),
            ("b:1", 7, False, 5),  # disabled: none of its slots
            ("c:1", 20, True, 300),  # not heard from: gone
            ("d:1", 4, True, 29),
        ):
            workers.add(_worker(host, capacity, enabled, now - timedelta(seconds=age_s)))
        assert workers.capacity(now, timeout) == 14
        assert workers.capacity(now + timedelta(seconds=60), timeout) is None
    engine.dispose()


def _worker(host: str, capacity: int, enabled: bool, seen: datetime) -> WorkerRow:
    return WorkerRow(
        host=host,
        scheme="http",
        ip="127.0.0.1",
        capacity=capacity,
        version="1",
        category="_default_worker_category",
        token="t",
        enabled=enabled,
        registered_at=seen,
        heartbeat_at=seen,
    )
