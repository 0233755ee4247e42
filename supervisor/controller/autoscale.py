"""Druid's lag-based task autoscaler (`ioConfig.autoScalerConfig`, strategy `lagBased`), as a
pure decision over the lag samples a supervisor's passes collect.

Every `lagCollectionIntervalMillis` a pass samples the supervisor's lag (the partitions' lags
aggregated by `lagAggregate`); the samples of the last `lagCollectionRangeMillis` make the
window. From `scaleActionStartDelayMillis` after the supervisor started, every
`scaleActionPeriodMillis`: when at least `triggerScaleOutFractionThreshold` of the window's
samples are at or above `scaleOutThreshold`, the task count grows by `scaleOutStep` (to at most
`taskCountMax` and the partition count); else when at least `triggerScaleInFractionThreshold`
are at or below `scaleInThreshold`, it shrinks by `scaleInStep` (to at least `taskCountMin`).
No change within `minTriggerScaleActionFrequencyMillis` of the last, nor while a group
publishes; a change empties the window.

What Druid does not: the new count does not restart every group. It is the supervisor's
effective taskCount (kept in the metadata DB, not a new spec version), and the planner rolls
over only the groups whose partitions it moves (supervisor/controller/plan.py); a group's new
tasks wait until the partitions they take over are no longer read by another group's tasks,
and start where those publish. Each decision, with its reason, is kept in the status (the
newest) and in the audit log, which the history shows beside the spec version it was taken under.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from supervisor.model.views import Snapshot
from tasks.spec.io_config import AutoScalerConfig


@dataclass
class LagWindow:
    """One supervisor's lag samples (monotonic seconds, lag), and its autoscaler's clock."""

    samples: deque[tuple[float, int]] = field(default_factory=deque)
    started: float | None = None  # when its first sample was taken
    last_decided: float | None = None  # when a scale action was last considered
    last_changed: float | None = None


@dataclass(frozen=True)
class Decision:
    before: int
    after: int
    reason: str

    def to_json(self, at: str) -> dict[str, Any]:
        return {"timestamp": at, "from": self.before, "to": self.after, "reason": self.reason}


def enabled(config: AutoScalerConfig | None) -> bool:
    return config is not None and config.enableTaskAutoScaler


def aggregate(lags: list[int], how: str) -> int:
    if not lags:
        return 0
    if how == "MAX":
        return max(lags)
    if how == "AVERAGE":
        return sum(lags) // len(lags)
    return sum(lags)


def sample(window: LagWindow, config: AutoScalerConfig, now: float, lags: list[int]) -> None:
    """Take a lag sample when one is due, and forget those older than the range."""
    if window.started is None:
        window.started = now
    interval = config.lagCollectionIntervalMillis / 1000
    if window.samples and now - window.samples[-1][0] < interval:
        return
    window.samples.append((now, aggregate(lags, config.lagAggregate)))
    horizon = now - config.lagCollectionRangeMillis / 1000
    while window.samples and window.samples[0][0] < horizon:
        window.samples.popleft()


def decide(
    window: LagWindow,
    config: AutoScalerConfig,
    now: float,
    current: int,
    partitions: int,
    publishing: bool,
) -> Decision | None:
    """The scale action due now, if any."""
    if window.started is None or now - window.started < config.scaleActionStartDelayMillis / 1000:
        return None
    if window.last_decided is not None and now - window.last_decided < (
        config.scaleActionPeriodMillis / 1000
    ):
        return None
    window.last_decided = now
    if window.last_changed is not None and now - window.last_changed < (
        config.minTriggerScaleActionFrequencyMillis / 1000
    ):
        return None
    lags = [lag for _, lag in window.samples]
    if not lags or publishing:
        return None
    assert config.taskCountMin is not None and config.taskCountMax is not None
    over = sum(1 for lag in lags if lag >= config.scaleOutThreshold) / len(lags)
    under = sum(1 for lag in lags if lag <= config.scaleInThreshold) / len(lags)
    ceiling = max(config.taskCountMin, min(config.taskCountMax, partitions or current))
    described = f"of {len(lags)} lag samples ({config.lagAggregate.lower()}, last {lags[-1]})"
    if over >= config.triggerScaleOutFractionThreshold and current < ceiling:
        after = min(current + config.scaleOutStep, ceiling)
        reason = f"{over:.0%} {described} at or above scaleOutThreshold {config.scaleOutThreshold}"
        return Decision(current, after, reason)
    if under >= config.triggerScaleInFractionThreshold and current > config.taskCountMin:
        after = max(current - config.scaleInStep, config.taskCountMin)
        reason = f"{under:.0%} {described} at or below scaleInThreshold {config.scaleInThreshold}"
        return Decision(current, after, reason)
    return None


def changed(window: LagWindow, now: float) -> None:
    """A scale action was taken: the window starts again."""
    window.samples.clear()
    window.last_changed = now


def partition_lags(snapshot: Snapshot) -> list[int]:
    """Each partition's lag: its latest offset less the furthest a task has read it to (or
    the committed offset); partitions nothing has read yet are left out."""
    position = dict(snapshot.committed)
    for task in snapshot.tasks:
        for partition, offset in (task.current or {}).items():
            position[partition] = max(position.get(partition, offset), offset)
    return [
        max(0, latest - position[partition])
        for partition, latest in snapshot.latest.items()
        if partition in position
    ]
