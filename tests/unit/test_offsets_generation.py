"""The offsets' generation in a task's segment names: a range read again after a reset names
new segments, replicas of one generation the same ones."""

from __future__ import annotations

from datetime import UTC, datetime

from supervisor.controller.actions import CreateTask
from supervisor.controller.execute import index_task
from supervisor.schemas.spec import SupervisorSpec
from tasks.output.segments import SegmentContext
from tasks.protocol import OFFSETS_GENERATION, offsets_generation, range_digest
from tests.specs import spec

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def test_the_generation_names_a_range_anew_and_none_names_it_as_before() -> None:
    start, end = {0: 0, 1: 0}, {0: 20, 1: 10}
    before = range_digest("words", start, end)
    # generation 0 names a range as the release before generations did (a replica of a task
    # it left agrees): sha1 of ["words",{"0":0,"1":0},{"0":20,"1":10}]
    assert range_digest("words", start, end, 0) == before == "db9fe232266e92cb"
    names = {range_digest("words", start, end, g) for g in (0, 1, 2)}
    assert len(names) == 3
    assert range_digest("words", start, end, 1) == range_digest("words", dict(start), end, 1)


def test_a_segment_context_names_its_segments_with_the_generation() -> None:
    def context(generation: int) -> SegmentContext:
        return SegmentContext(
            "t", "d", "words", {0: 0}, {0: 9}, "1", "/deep", generation=generation
        )

    assert context(0).segment_id(0, 3_600_000, 0) != context(1).segment_id(0, 3_600_000, 0)
    assert context(2).version == range_digest("words", {0: 0}, {0: 9}, 2)


def test_a_context_generation_is_a_positive_count_or_none() -> None:
    for given, read in [(3, 3), (0, 0), (-1, 0), (True, 0), ("2", 0), (1.5, 0), (None, 0)]:
        assert offsets_generation({OFFSETS_GENERATION: given}) == read
    assert offsets_generation({}) == 0


def test_a_task_carries_its_supervisors_generation_and_never_a_spec_given_one() -> None:
    raw = spec("wiki")
    raw["context"] = {"priority": 5, OFFSETS_GENERATION: 7}
    parsed = SupervisorSpec.model_validate(raw)
    action = CreateTask("index_kafka_wiki_x_0", 0, {0: 0}, "x")
    first = index_task(parsed, 1, action, NOW)
    assert first.context == {"priority": 5, "specVersion": "1", "identity": "x"}
    later = index_task(parsed, 1, action, NOW, generation=2)
    assert later.context[OFFSETS_GENERATION] == 2
    assert offsets_generation(later.context) == 2
