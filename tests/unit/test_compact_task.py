"""A compact task's payload and its file writer (tasks/compaction.py) without Spark: the
payload told apart from an indexing task's by its type, wherever one is read; the writer's
files of at most maxRowsPerSegment rows, named for their segments, __time in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from supervisor.model.compaction import parse_config
from supervisor.model.retention import RuleError
from supervisor.services.compaction import _bucket
from tasks.compaction import _iso, _writer
from tasks.host_protocol import Assignment
from tasks.protocol import CompactTask, IndexKafkaTask, parse_task, parse_task_json
from tasks.storage import Storage

COMPACT = {
    "type": "compact",
    "id": "compact_wiki_1",
    "dataSource": "wiki",
    "interval": ["2026-11-22T00:00:00+00:00", "2026-11-23T00:00:00+00:00"],
    "version": "v1",
    "inputs": {"wiki_a_0": "/deep/a.parquet", "wiki_b_0": "/deep/b.parquet"},
    "maxRowsPerSegment": 3,
    "dimensions": ["word"],
    "metrics": ["count"],
}
KAFKA = {
    "type": "index_kafka",
    "id": "wiki-0",
    "dataSchema": {
        "dataSource": "wiki",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["word"]},
    },
    "ioConfig": {
        "type": "kafka",
        "startSequenceNumbers": {
            "type": "start",
            "stream": "words",
            "partitionSequenceNumberMap": {"0": 0},
        },
        "consumerProperties": {"bootstrap.servers": "127.0.0.1:9092"},
        "inputFormat": {"type": "json"},
    },
}


def test_either_payload_is_read_by_its_type() -> None:
    compact = parse_task(COMPACT)
    assert isinstance(compact, CompactTask) and compact.group_id is None
    assert compact.supervisorId is None and compact.datasource == "wiki"
    assert isinstance(parse_task(KAFKA), IndexKafkaTask)
    assert parse_task_json(compact.model_dump_json()) == compact
    wired = Assignment(payload=compact, token="t").to_wire()
    assert Assignment.model_validate(wired).payload == compact


@pytest.mark.parametrize(
    "change",
    [
        {"type": "merge"},
        {"inputs": {}},
        {"maxRowsPerSegment": 0},
        {"id": "../escape"},
        {"dataSource": "_tasks"},
    ],
)
def test_a_bad_compact_payload_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        parse_task({**COMPACT, **change})
    with pytest.raises(ValidationError):
        parse_task_json(b"{not json")


def test_interval_bounds_are_written_as_druid_does() -> None:
    assert _iso("2026-11-22T00:00:00+00:00") == "2026-11-22T00:00:00.000Z"
    assert _iso("2026-11-22T01:30:00Z") == "2026-11-22T01:30:00.000Z"


def test_the_writer_splits_rows_into_files_of_at_most_the_bound(tmp_path: Path) -> None:
    storage = Storage(root=str(tmp_path))
    directory = storage.path("wiki", "interval", "v1", "compact_wiki_1")
    names = ["__time", "word.name", "count"]  # a dotted name travels positionally
    times = pa.array(range(7), pa.int64()).cast(pa.timestamp("us", tz="Asia/Tokyo"))
    batches = [
        pa.RecordBatch.from_arrays(
            [
                times.slice(start, 4),
                pa.array(list("abcdefg")[start : start + 4]),
                pa.array(range(start, min(start + 4, 7)), pa.int64()),
            ],
            names=["c0", "c1", "c2"],
        )
        for start in (0, 4)
    ]
    write = _writer(storage, directory, names, 3, "wiki_x_v1", "compact_wiki_1")
    written = pa.Table.from_batches(list(write(iter(batches)))).to_pylist()
    assert [(w["chunk"], w["rows"]) for w in written] == [(0, 3), (1, 3), (2, 1)]
    words: list[str] = []
    for entry in written:
        assert entry["path"] == f"{directory}/{entry['chunk']}.parquet"
        assert entry["size"] == Path(entry["path"]).stat().st_size
        table = pq.read_table(entry["path"])
        meta = table.schema.metadata
        assert meta[b"sluicegate.segmentId"] == f"wiki_x_v1_{entry['chunk']}".encode()
        assert meta[b"sluicegate.compactedBy"] == b"compact_wiki_1"
        assert table.schema.field("__time").type == pa.timestamp("us", tz="UTC")
        assert table.column_names == names
        words += table.column("word.name").to_pylist()
    assert words == list("abcdefg")


def test_an_interval_whose_compaction_failed_is_tried_again_after_a_doubling_backoff() -> None:
    from datetime import UTC, datetime, timedelta

    from supervisor.services.compaction import FIRST_BACKOFF_S, MAX_BACKOFF_S, backoff_over

    now = datetime(2026, 12, 1, tzinfo=UTC)

    def ago(seconds: float) -> datetime:
        return now - timedelta(seconds=seconds)

    assert backoff_over([], now)  # never failed
    # once: FIRST_BACKOFF_S after it (a task lost with its host is retried within a minute)
    assert not backoff_over([ago(FIRST_BACKOFF_S - 1)], now)
    assert backoff_over([ago(FIRST_BACKOFF_S)], now)
    # twice: twice as long after the last
    assert not backoff_over([ago(100), ago(2 * FIRST_BACKOFF_S - 1)], now)
    assert backoff_over([ago(100), ago(2 * FIRST_BACKOFF_S)], now)
    # however often: at most MAX_BACKOFF_S
    many = [ago(MAX_BACKOFF_S - 1)] * 10
    assert not backoff_over(many, now)
    assert backoff_over([ago(MAX_BACKOFF_S)] * 10, now)
    # an interval that always fails, tried at each backoff's end: the waits double up to the
    # cap and stay there (the run is not forgotten as its first failures grow old)
    failures: list[datetime] = []
    moment = now
    waits = []
    for _ in range(12):
        failures.append(moment)
        tried = moment
        while not backoff_over(failures, moment):
            moment += timedelta(seconds=10)
        waits.append((moment - tried).total_seconds())
    assert waits[:5] == [30, 60, 120, 240, 480]
    assert waits[5:] == [MAX_BACKOFF_S] * 7
    # a failure long before the last is another run: the wait starts short again
    assert backoff_over([ago(FIRST_BACKOFF_S), ago(FIRST_BACKOFF_S + 2 * MAX_BACKOFF_S)], now)


def test_the_datasources_take_turns_for_the_compaction_slots() -> None:
    from typing import Any

    from supervisor.services.compaction import CompactionDuty

    duty: Any = CompactionDuty(None, None, None, None, None, None, 10)  # type: ignore[arg-type]
    configs: dict[str, dict[str, Any]] = {name: {} for name in ("c", "a", "b", "d")}
    assert [name for name, _ in duty._in_turn(configs)] == ["a", "b", "c", "d"]
    duty.last = "b"  # given the last task: the next run starts after it
    assert [name for name, _ in duty._in_turn(configs)] == ["c", "d", "a", "b"]
    duty.last = "d"
    assert [name for name, _ in duty._in_turn(configs)] == ["a", "b", "c", "d"]
    duty.last = "bb"  # its config gone meanwhile: the next name after it
    assert [name for name, _ in duty._in_turn(configs)] == ["c", "d", "a", "b"]


@pytest.mark.parametrize(
    ("given", "name"),
    [
        (None, None),
        ({}, None),
        ({"segmentGranularity": "MONTH"}, "month"),
        ({"segmentGranularity": "year"}, "year"),
        ({"segmentGranularity": {"type": "period", "period": "P1M"}}, "month"),
        ({"segmentGranularity": {"type": "week"}}, "week"),
        ({"segmentGranularity": None, "queryGranularity": None, "rollup": None}, None),
    ],
)
def test_a_compaction_granularity_is_druids_segment_granularity(
    given: object, name: object
) -> None:
    raw = {"dataSource": "wiki", **({} if given is None else {"granularitySpec": given})}
    assert parse_config(raw).granularity == name


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ("MONTH", "granularitySpec"),
        ({"segmentGranularity": "FORTNIGHT"}, "granularitySpec.segmentGranularity"),
        ({"segmentGranularity": "NONE"}, "granularitySpec.segmentGranularity"),
        ({"segmentGranularity": "ALL"}, "granularitySpec.segmentGranularity"),
        ({"segmentGranularity": 3}, "granularitySpec.segmentGranularity"),
        (
            {"segmentGranularity": {"type": "period", "period": "P5D"}},
            "granularitySpec.segmentGranularity",
        ),
        (
            {"segmentGranularity": "DAY", "queryGranularity": "HOUR"},
            "granularitySpec.queryGranularity",
        ),
        ({"segmentGranularity": "DAY", "rollup": True}, "granularitySpec.rollup"),
        ({"segmentGranularity": "DAY", "type": "uniform"}, "granularitySpec.type"),
    ],
)
def test_a_compaction_granularity_sluicegate_does_not_run_is_refused_by_its_field(
    given: object, field: str
) -> None:
    with pytest.raises(RuleError) as raised:
        parse_config({"dataSource": "wiki", "granularitySpec": given})
    assert raised.value.field == field


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("interval", "granularity", "bucket"),
    [
        ((_utc(2026, 10, 3), _utc(2026, 10, 4)), "month", (_utc(2026, 10, 1), _utc(2026, 11, 1))),
        ((_utc(2026, 10, 31), _utc(2026, 11, 1)), "month", (_utc(2026, 10, 1), _utc(2026, 11, 1))),
        ((_utc(2026, 11, 1), _utc(2026, 11, 2)), "month", (_utc(2026, 11, 1), _utc(2026, 12, 1))),
        ((_utc(2026, 8, 1), _utc(2026, 9, 1)), "quarter", (_utc(2026, 7, 1), _utc(2026, 10, 1))),
        ((_utc(2026, 12, 31), _utc(2027, 1, 1)), "year", (_utc(2026, 1, 1), _utc(2027, 1, 1))),
        (
            (_utc(2026, 10, 3, 5), _utc(2026, 10, 3, 6)),
            "day",
            (_utc(2026, 10, 3), _utc(2026, 10, 4)),
        ),
        # a week that straddles two months, and a day against hours: no bucket holds them
        ((_utc(2026, 9, 28), _utc(2026, 10, 5)), "month", None),
        ((_utc(2026, 10, 3), _utc(2026, 10, 4)), "hour", None),
        ((_utc(2026, 10, 3), _utc(2026, 10, 4)), "day", (_utc(2026, 10, 3), _utc(2026, 10, 4))),
    ],
)
def test_a_segment_falls_in_the_granularity_bucket_that_holds_it_whole(
    interval: tuple[datetime, datetime], granularity: str, bucket: object
) -> None:
    assert _bucket(interval, granularity) == bucket
