"""Druid's retention rules (supervisor/model/retention.py): which segment intervals each
applies to, the first match in order, and what a bad rule list is told."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from supervisor.model.retention import RuleError, first_match, minus, parse_rules
from tasks.spec.periods import parse_period

NOW = datetime(2026, 3, 31, 12, tzinfo=UTC)


def day(month: int, dom: int) -> tuple[datetime, datetime]:
    start = datetime(2026, month, dom, tzinfo=UTC)
    return start, start.replace(day=dom + 1) if dom < 28 else datetime(
        2026, month + 1, 1, tzinfo=UTC
    )


def applies(rule: dict[str, object], interval: tuple[datetime, datetime]) -> bool:
    (parsed,) = parse_rules([rule])
    return parsed.applies(interval[0], interval[1], NOW)


@pytest.mark.parametrize(
    ("rule", "yes", "no"),
    [
        ({"type": "loadForever"}, [day(1, 1), day(3, 30)], []),
        ({"type": "dropForever"}, [day(1, 1)], []),
        # the last 7 days and the future (includeFuture is true by default)
        (
            {"type": "loadByPeriod", "period": "P7D"},
            [day(3, 25), day(3, 30), day(4, 5)],
            [day(3, 23)],
        ),
        (
            {"type": "loadByPeriod", "period": "P7D", "includeFuture": False},
            [day(3, 25), day(3, 31)],
            [day(4, 5), day(3, 23)],
        ),
        (
            {"type": "dropBeforeByPeriod", "period": "P7D"},
            [day(3, 23), day(1, 1)],
            [day(3, 24), day(3, 25)],
        ),
        (
            {"type": "dropByPeriod", "period": "P7D"},
            [day(3, 25), day(4, 5)],
            [day(3, 24), day(3, 1)],
        ),
        (
            {"type": "dropByPeriod", "period": "P7D", "includeFuture": False},
            [day(3, 25)],
            [day(4, 5), day(3, 31)],  # the 31st runs past now
        ),
        (
            {"type": "loadByInterval", "interval": "2026-02-01/2026-03-01"},
            [day(2, 1), day(2, 28)],
            [day(3, 1), day(1, 31)],
        ),
        (
            {"type": "dropByInterval", "interval": "2026-02-01T00:00:00Z/2026-02-10"},
            [day(2, 1), day(2, 9)],
            [day(2, 10), day(1, 31)],
        ),
    ],
)
def test_each_rule_applies_to_the_intervals_druid_says(
    rule: dict[str, object],
    yes: list[tuple[datetime, datetime]],
    no: list[tuple[datetime, datetime]],
) -> None:
    assert [applies(rule, i) for i in yes] == [True] * len(yes)
    assert [applies(rule, i) for i in no] == [False] * len(no)


def test_the_first_rule_that_applies_wins_and_none_keeps() -> None:
    rules = parse_rules(
        [
            {"type": "loadByPeriod", "period": "P30D", "tieredReplicants": {"_default_tier": 1}},
            {"type": "dropForever"},
        ]
    )
    kept = first_match(rules, *day(3, 20), NOW)
    dropped = first_match(rules, *day(1, 20), NOW)
    assert kept is not None and not kept.drops
    assert dropped is not None and dropped.drops
    only_load = parse_rules([{"type": "loadByInterval", "interval": "2026-03-01/2026-04-01"}])
    assert first_match(only_load, *day(1, 1), NOW) is None  # no rule: kept


def test_periods_are_taken_off_by_the_calendar() -> None:
    assert minus(NOW, parse_period("P1M")) == datetime(2026, 2, 28, 12, tzinfo=UTC)
    assert minus(NOW, parse_period("P1Y2M1DT1H")) == datetime(2025, 1, 30, 11, tzinfo=UTC)
    assert minus(NOW, parse_period("P3000Y")) == datetime.min.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"type": "loadForever"}, "rules"),
        ([{"type": "keepSome"}], "rules[0].type"),
        ([{"type": "loadForever"}, {"type": "dropByPeriod"}], "rules[1].period"),
        ([{"type": "dropByPeriod", "period": "P1Q"}], "rules[0].period"),
        ([{"type": "dropByInterval", "interval": "2026-02-01"}], "rules[0].interval"),
        ([{"type": "dropByInterval", "interval": "2026-02-02/2026-02-01"}], "rules[0].interval"),
        ([{"type": "dropForever", "period": "P1D"}], "rules[0].period"),
        (
            [{"type": "loadByPeriod", "period": "P1D", "includeFuture": "yes"}],
            "rules[0].includeFuture",
        ),
        ([{"type": "loadForever", "tieredReplicants": {"hot": -1}}], "rules[0].tieredReplicants"),
        ([7], "rules[0]"),
        (
            [{"type": "dropByInterval", "interval": "0001-01-01T00:00+01:00/2020-01-01"}],
            "rules[0].interval",
        ),
        (
            [{"type": "dropByInterval", "interval": "2020-01-01/9999-12-31T23:00-05:00"}],
            "rules[0].interval",
        ),
    ],
)
def test_a_bad_rule_list_names_the_field(raw: object, field: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rules(raw)
    assert caught.value.field == field
