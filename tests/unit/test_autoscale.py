"""The lag-based autoscaler's decisions over lag samples (Druid's LagBasedAutoScaler rules)."""

from __future__ import annotations

from typing import Any

from supervisor.controller.autoscale import LagWindow, aggregate, changed, decide, sample
from tasks.spec.io_config import AutoScalerConfig


def config(**given: Any) -> AutoScalerConfig:
    base = {
        "enableTaskAutoScaler": True,
        "taskCountMin": 1,
        "taskCountMax": 4,
        "lagCollectionIntervalMillis": 1000,
        "lagCollectionRangeMillis": 5000,
        "scaleActionStartDelayMillis": 3000,
        "scaleActionPeriodMillis": 1000,
        "minTriggerScaleActionFrequencyMillis": 4000,
        "scaleOutThreshold": 100,
        "scaleInThreshold": 10,
        "triggerScaleOutFractionThreshold": 0.5,
        "triggerScaleInFractionThreshold": 0.8,
    }
    return AutoScalerConfig.model_validate({**base, **given})


def fed(window: LagWindow, settings: AutoScalerConfig, lags: list[int], start: float = 0) -> float:
    """One sample a second; returns the time after the last."""
    now = start
    for lag in lags:
        sample(window, settings, now, [lag])
        now += 1
    return now - 1


def test_no_action_before_the_start_delay_nor_more_often_than_the_period() -> None:
    settings, window = config(), LagWindow()
    now = fed(window, settings, [500, 500])
    assert decide(window, settings, now, 1, 6, False) is None  # 1 s < 3 s start delay
    now = fed(window, settings, [500, 500], now + 1)
    decision = decide(window, settings, now, 1, 6, False)
    assert decision is not None and (decision.before, decision.after) == (1, 3)
    assert "at or above scaleOutThreshold 100" in decision.reason
    assert decide(window, settings, now + 0.5, 1, 6, False) is None  # within the period


def test_scale_out_is_capped_by_task_count_max_and_the_partitions() -> None:
    settings, window = config(scaleOutStep=5), LagWindow()
    now = fed(window, settings, [500] * 5)
    assert decide(window, settings, now, 1, 6, False).after == 4  # type: ignore[union-attr]
    window = LagWindow()
    now = fed(window, settings, [500] * 5)
    assert decide(window, settings, now, 1, 2, False).after == 2  # type: ignore[union-attr]
    window = LagWindow()
    now = fed(window, settings, [500] * 5)
    assert decide(window, settings, now, 4, 6, False) is None  # at the most already


def test_scale_in_after_most_samples_are_low_and_not_below_the_minimum() -> None:
    settings, window = config(), LagWindow()
    now = fed(window, settings, [0, 5, 200, 5, 5])  # 4 of 5 low: 80%
    decision = decide(window, settings, now, 3, 6, False)
    assert decision is not None and (decision.before, decision.after) == (3, 2)
    window = LagWindow()
    now = fed(window, settings, [0] * 5)
    assert decide(window, settings, now, 1, 6, False) is None


def test_nothing_while_a_group_publishes_or_soon_after_a_change() -> None:
    settings, window = config(), LagWindow()
    now = fed(window, settings, [500] * 5)
    assert decide(window, settings, now, 1, 6, True) is None
    decision = decide(window, settings, now + 1, 1, 6, False)
    assert decision is not None
    changed(window, now + 1)
    assert not window.samples
    now = fed(window, settings, [500] * 3, now + 2)
    assert decide(window, settings, now, 3, 6, False) is None  # 3 s after: < 4 s
    now = fed(window, settings, [500], now + 2)
    assert decide(window, settings, now, 3, 6, False) is not None


def test_samples_are_taken_once_an_interval_and_kept_for_the_range() -> None:
    settings, window = config(), LagWindow()
    sample(window, settings, 0, [1])
    sample(window, settings, 0.5, [2])  # within the interval: not taken
    fed(window, settings, [3] * 10, 1)
    assert len(window.samples) == 6 and window.samples[0][0] == 5  # the last 5 s
    assert [aggregate([1, 5, 3], h) for h in ("SUM", "MAX", "AVERAGE")] == [9, 5, 3]
