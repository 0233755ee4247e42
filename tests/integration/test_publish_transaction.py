"""The exactly-once publish transaction on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from supervisor.clock import utc_now
from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow
from supervisor.services.publish import PublishService
from tasks.protocol import PublishAction, SegmentDescriptor, SequenceNumbers
from tasks.protocol import PublishOutcome as Outcome


@pytest.fixture
def sessions(metadata_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(metadata_url)
    migrate(engine)
    yield session_factory(engine)
    engine.dispose()


def action(
    start: dict[int, int], end: dict[int, int], tag: str = "a", replica: str = "r0"
) -> PublishAction:
    """A publish of one segment; replicas of a generation publish the same segment ids from
    files of their own (their paths differ)."""
    segments = [
        SegmentDescriptor(
            id=f"wiki_{tag}_{start}_{end}",
            dataSource="wiki",
            intervalStart="2026-11-22T09:00:00+00:00",
            intervalEnd="2026-11-22T10:00:00+00:00",
            version=tag,
            partitionNum=0,
            path=f"/deep/{tag}/{replica}.parquet",
            size=100,
            numRows=sum(end[p] - start[p] for p in start),
            dimensions=["channel"],
            metrics=["count"],
        )
    ]

    def seq(kind: str, offsets: dict[int, int]) -> SequenceNumbers:
        return SequenceNumbers(
            type=kind,  # type: ignore[arg-type]
            stream="edits",
            partitionSequenceNumberMap={str(p): o for p, o in offsets.items()},
        )

    return PublishAction(
        supervisorId="wiki",
        dataSource="wiki",
        segments=segments,
        startMetadata=seq("start", start),
        endMetadata=seq("end", end),
    )


def publish(sessions: sessionmaker[Session], act: PublishAction, task: str = "t1") -> Any:
    with sessions() as session:
        return PublishService(session, utc_now).publish(task, act)


def committed(sessions: sessionmaker[Session]) -> tuple[dict[str, int] | None, int]:
    with sessions() as session:
        row = session.get(CommittedOffsetsRow, "wiki")
        count = session.scalar(select(func.count()).select_from(SegmentRow))
        return (dict(row.offsets) if row else None), int(count or 0)


def test_first_publish_commits_segments_and_end_offsets(sessions) -> None:
    result = publish(sessions, action({0: 0, 1: 0}, {0: 10, 1: 7}))
    assert result.outcome is Outcome.PUBLISHED
    assert committed(sessions) == ({"0": 10, "1": 7}, 1)


def test_a_replica_publishing_second_succeeds_without_writing(sessions) -> None:
    first = action({0: 0}, {0: 10}, replica="replica-1")
    assert publish(sessions, first, "replica-1").outcome is Outcome.PUBLISHED
    second = publish(sessions, action({0: 0}, {0: 10}, replica="replica-2"), "replica-2")
    assert second.outcome is Outcome.ALREADY_PUBLISHED and second.success  # drops its files
    assert committed(sessions) == ({"0": 10}, 1)


def test_a_replica_late_after_its_successor_published_is_told_its_range_was(sessions) -> None:
    # e2e, shared runtime: a replica's publish retried after the overlord's restart came once
    # the successor generation had published too; it was told "inconsistency" and FAILED
    first = action({0: 0}, {0: 10}, "g1", replica="replica-1")
    assert publish(sessions, first, "replica-1").outcome is Outcome.PUBLISHED
    successor = action({0: 10}, {0: 25}, "g2")
    assert publish(sessions, successor, "successor").outcome is Outcome.PUBLISHED
    late = publish(sessions, action({0: 0}, {0: 10}, "g1", replica="replica-2"), "replica-2")
    assert late.outcome is Outcome.ALREADY_PUBLISHED and late.success
    assert committed(sessions) == ({"0": 25}, 2)
    # a range past the committed offsets that nobody published (skipped by a reset) fails
    skipped = publish(sessions, action({0: 12}, {0: 20}, "g9"), "skipped")
    assert skipped.outcome is Outcome.FAILED
    assert committed(sessions) == ({"0": 25}, 2)


def test_a_publish_asked_again_after_its_answer_was_lost_is_the_tasks_own(sessions) -> None:
    act = action({0: 0}, {0: 10}, replica="t1")
    assert publish(sessions, act, "t1").outcome is Outcome.PUBLISHED
    # the overlord died between the commit and the answer: the task asks again (a new
    # leader) and must keep its files, which are the published segments
    again = publish(sessions, act, "t1")
    assert again.outcome is Outcome.PUBLISHED
    assert "earlier attempt" in again.reason
    assert committed(sessions) == ({"0": 10}, 1)


def test_successor_continues_from_the_end_offsets(sessions) -> None:
    publish(sessions, action({0: 0, 1: 0}, {0: 10, 1: 7}, "g1"))
    result = publish(sessions, action({0: 10, 1: 7}, {0: 15, 1: 9}, "g2"))
    assert result.outcome is Outcome.PUBLISHED
    assert committed(sessions) == ({"0": 15, "1": 9}, 2)


def test_other_partitions_are_kept(sessions) -> None:
    publish(sessions, action({0: 0}, {0: 10}, "p0"))
    publish(sessions, action({1: 0}, {1: 4}, "p1"))
    assert committed(sessions) == ({"0": 10, "1": 4}, 2)


def test_start_ahead_of_committed_is_retryable(sessions) -> None:
    publish(sessions, action({0: 0}, {0: 10}, "g1"))
    result = publish(sessions, action({0: 20}, {0: 30}, "g3"))
    assert result.outcome is Outcome.RETRY
    assert "still publishing" in result.reason
    assert committed(sessions) == ({"0": 10}, 1)


def test_first_publish_waits_for_an_earlier_running_generation(sessions) -> None:
    # nothing committed: without the tasks table any start would match, so a fast successor
    # (an empty range) could commit 10->10 before its predecessor 0->10, losing 0..10
    now = utc_now()
    with sessions() as session:
        session.add(
            TaskRow(
                id="g1",
                type="index_kafka",
                supervisor_id="wiki",
                datasource="wiki",
                group_id=0,
                payload={
                    "ioConfig": {"startSequenceNumbers": {"partitionSequenceNumberMap": {"0": 0}}}
                },
                status="RUNNING",
                created_at=now,
                updated_at=now,
            )
        )
        session.commit()
    result = publish(sessions, action({0: 10}, {0: 10}, "g2"), task="g2")
    assert result.outcome is Outcome.RETRY
    assert "g1" in result.reason and "still publishing" in result.reason
    assert committed(sessions) == (None, 0)
    assert publish(sessions, action({0: 0}, {0: 10}, "g1"), task="g1").success
    assert publish(sessions, action({0: 10}, {0: 10}, "g2"), task="g2").success
    assert committed(sessions) == ({"0": 10}, 2)


def test_mismatched_start_fails_and_changes_nothing(sessions) -> None:
    publish(sessions, action({0: 0}, {0: 10}, "g1"))
    result = publish(sessions, action({0: 5}, {0: 12}, "bad"))
    assert result.outcome is Outcome.FAILED
    assert "inconsistency between the committed offsets" in result.reason
    assert committed(sessions) == ({"0": 10}, 1)


def _compact_away(sessions: sessionmaker[Session]) -> None:
    """What a compaction commits of this (tests/integration/test_compaction.py runs one): the
    segments' rows replaced, and its task's report naming them and their files."""
    with sessions() as session:
        rows = list(session.scalars(select(SegmentRow)))
        replaced = {row.id: row.path for row in rows}
        for row in rows:
            session.delete(row)
        now = utc_now()
        session.add(
            TaskRow(
                id="compact_wiki",
                type="compact",
                datasource="wiki",
                payload={},
                status="SUCCESS",
                created_at=now,
                updated_at=now,
                report={"status": "SUCCESS", "segments": [], "replaced": replaced},
            )
        )
        session.commit()


def test_a_replica_late_after_a_compaction_is_told_its_range_was_published(sessions) -> None:
    first = action({0: 0}, {0: 10}, replica="replica-1")
    assert publish(sessions, first, "replica-1").outcome is Outcome.PUBLISHED
    _compact_away(sessions)
    late = publish(sessions, action({0: 0}, {0: 10}, replica="replica-2"), "replica-2")
    assert late.outcome is Outcome.ALREADY_PUBLISHED, late.reason
    # the first asking again (its answer lost) keeps its files: they were the segments
    assert publish(sessions, first, "replica-1").outcome is Outcome.PUBLISHED
    # other segments for the same range were never published
    other = publish(sessions, action({0: 0}, {0: 10}, "different"), "replica-3")
    assert other.outcome is Outcome.FAILED
    assert committed(sessions) == ({"0": 10}, 0)


def test_same_range_with_other_segments_fails(sessions) -> None:
    publish(sessions, action({0: 0}, {0: 10}, "a"))
    result = publish(sessions, action({0: 0}, {0: 10}, "different"))
    assert result.outcome is Outcome.FAILED
    assert committed(sessions) == ({"0": 10}, 1)


def test_a_deposed_leaders_publish_is_refused_and_writes_nothing(sessions) -> None:
    with sessions() as session:
        assert LeaseRepository(session).acquire("old", "http://old", 0.05) == 1
    time.sleep(0.1)  # the old leader's lease runs out (it was paused, say)
    with sessions() as session:
        assert LeaseRepository(session).acquire("new", "http://new", 30) == 2
    act = action({0: 0}, {0: 10})
    with sessions() as session:
        result = PublishService(session, utc_now, epoch=1).publish("t1", act)
    assert result.outcome is Outcome.RETRY  # the task tries again, and reaches the leader
    assert "leader lease is at epoch 2" in result.reason
    assert committed(sessions) == (None, 0)
    with sessions() as session:
        result = PublishService(session, utc_now, epoch=2).publish("t1", act)
    assert result.outcome is Outcome.PUBLISHED
    assert committed(sessions) == ({"0": 10}, 1)


def test_concurrent_replicas_publish_exactly_once(sessions) -> None:
    outcomes: list[Outcome] = []
    barrier = threading.Barrier(4)

    def replica(name: str) -> None:
        barrier.wait()
        mine = action({0: 0, 1: 0}, {0: 100, 1: 50}, replica=name)
        for _ in range(20):  # what the task's publish client does: retry retryable outcomes
            result = publish(sessions, mine, name)
            if result.outcome is not Outcome.RETRY:
                outcomes.append(result.outcome)
                return

    threads = [threading.Thread(target=replica, args=(f"r{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == sorted([Outcome.PUBLISHED] + [Outcome.ALREADY_PUBLISHED] * 3)
    assert committed(sessions) == ({"0": 100, "1": 50}, 1)
