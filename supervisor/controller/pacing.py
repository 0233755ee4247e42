"""When a supervisor passes next, and whether a pass may be light: the answers a pass gives
the work queue (Result), each supervisor's pace, and the rule for light passes.

Periodic passes run every `period`, as Druid runs runInternal, each supervisor at a phase of
its own (from a hash of its id), so a thousand spread their passes over the period instead of
passing all at once after a restart or a wave; passes woken in between (API changes, task
exits) do not move them. A deadline the plan names (a taskDuration's end) comes first when
sooner."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pacing is pure: what a pass reads and does is the reconciler's
    from supervisor.controller.requests import Pending

DEFAULT_PERIOD_S = 30.0  # Druid's ioConfig.period, until the first pass has read the spec
ACTED_S = 0.2  # after a pass that acted: the next one soon, to see what the actions did
AGAIN_S = 1.0  # a checkpoint none of whose replicas could be paused is asked again this soon
SLOT_WAIT_S = 2.0  # tasks no task host had a slot for are asked for again this soon


@dataclass(frozen=True)
class Done:
    """The supervisor is gone (no spec, or terminated and wound down): no more passes."""


@dataclass(frozen=True)
class RequeueAfter:
    """Pass again in `seconds`; `first`: ahead of every pass already due."""

    seconds: float
    first: bool = False


@dataclass(frozen=True)
class Retry:
    """The pass failed: again after the supervisor's backoff, but no later than `at_most`
    seconds (its next periodic pass)."""

    at_most: float


Result = Done | RequeueAfter | Retry


@dataclass
class Pace:
    """One supervisor's timing; touched by its own passes alone (all times monotonic)."""

    phase: float  # where in each period its periodic pass falls, in (0, 1]
    period_s: float = DEFAULT_PERIOD_S
    due: float | None = None  # when the next periodic pass is due
    deadline: float | None = None  # when the clock next changes the plan
    full_at: float | None = None  # when the last full pass wants the next

    @classmethod
    def of(cls, supervisor_id: str) -> Pace:
        return cls(phase=(zlib.crc32(supervisor_id.encode()) % 1000 + 1) / 1000)

    def until_due(self, now: float) -> float:
        """Seconds to the next periodic pass, or to the deadline when that is sooner."""
        if self.due is None or self.due > now + self.period_s:  # new, or the period shrank
            self.due = now + self.phase * self.period_s
        while self.due <= now:
            self.due += self.period_s
        if self.deadline is not None and self.deadline < self.due:
            return max(0.0, self.deadline - now)
        return self.due - now

    def within(self, now: float, seconds: float) -> None:
        """The next pass no later than `seconds` from now."""
        self.deadline = min(self.deadline or math.inf, now + seconds)

    def after_full(self, now: float, acted: bool, rolled: bool) -> RequeueAfter:
        """The next pass after a full one. After a rollover the successors are created by
        the very next pass, and until then the group has no task reading: that pass must not
        queue behind every supervisor that is due (in a wave of a thousand handoffs it
        waited ~20 s)."""
        if rolled:
            self.full_at = now
            return RequeueAfter(0.0, first=True)
        seconds = ACTED_S if acted else self.until_due(now)
        self.full_at = now + seconds
        return RequeueAfter(seconds)

    def after_light(self, now: float) -> RequeueAfter:
        """The next pass after a light one: the full pass stays where the last one put it."""
        assert self.full_at is not None
        return RequeueAfter(max(0.0, min(self.until_due(now), self.full_at - now)))


def checkpoints_only(pending: Pending) -> bool:
    """Whether the pending intents ask checkpoints and nothing else."""
    return bool(pending.checkpoints) and not (
        pending.handoffs or pending.restarts or pending.shutdowns
    )


def light(pace: Pace, now: float, snapshot_stands: bool, pending: Pending) -> bool:
    """The rule for a light pass (checkpoints only, from the last full pass's snapshot): the
    pending intents ask checkpoints and nothing else, the snapshot still stands (nothing
    observed in it changed since: no spec change, no task exit), and the full pass it asked
    for is not due yet. With a hundred supervisors checkpointing every 5 s, full passes were
    most of the overlord's work."""
    return (
        snapshot_stands
        and pace.full_at is not None
        and now < pace.full_at
        and checkpoints_only(pending)
    )
