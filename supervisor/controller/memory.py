"""What earlier passes of one supervisor learned (`Memory`): its pace, its intents between
passes, what it saw of the stream, the autoscaler's lag window, the consumer-group mirror and
the last full pass's snapshot. The work queue runs one pass per supervisor at a time, so a
supervisor's memory has one writer."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from supervisor.controller.autoscale import LagWindow
from supervisor.controller.mirror import Mirrored
from supervisor.controller.observe import TaskProbe
from supervisor.controller.pacing import Pace
from supervisor.controller.requests import Asked
from supervisor.model.views import Snapshot
from supervisor.schemas.spec import SupervisorSpec
from tasks.partitions import Offsets, PartitionKey

IDLE_AFTER_MS = 600_000  # Druid's default inactiveAfterMillis


@dataclass
class Seen:
    """What earlier observations of the stream showed."""

    latest_changed_at: datetime  # when the latest offsets last moved
    partition_sets: dict[tuple[PartitionKey, ...], datetime] = field(default_factory=dict)
    last_latest: Offsets | None = None  # the first observation is news


@dataclass
class Memory:
    pace: Pace
    seen: Seen
    asked: Asked = field(default_factory=Asked)
    adopted: bool = False  # the first pass adopts what an earlier overlord left running
    probe: TaskProbe = field(default_factory=TaskProbe)
    laps: dict[str, float] = field(default_factory=dict)  # where the last pass's time went
    no_slot: str | None = None  # why its tasks wait for a task host's slot, while they do
    snapshot: Snapshot | None = None  # what the last full pass saw
    lag: LagWindow = field(default_factory=LagWindow)  # the autoscaler's
    mirrored: Mirrored = field(default_factory=Mirrored)


def remembered(snapshot: Snapshot, spec: SupervisorSpec, seen: Seen) -> Snapshot:
    """The snapshot with what earlier passes know: when the partition set was first seen, and
    whether the supervisor is idle (idleConfig: all read, nothing new for a while)."""
    now = snapshot.now
    since = seen.partition_sets.setdefault(snapshot.partitions, now)
    if snapshot.latest != seen.last_latest:
        seen.last_latest, seen.latest_changed_at = dict(snapshot.latest), now
    config = spec.spec.ioConfig.idleConfig
    idle = False
    if config is not None and config.enabled:
        after = timedelta(milliseconds=config.inactiveAfterMillis or IDLE_AFTER_MS)
        caught_up = all(
            snapshot.committed.get(p, snapshot.earliest.get(p, 0)) >= offset
            for p, offset in snapshot.latest.items()
        )
        idle = caught_up and now >= seen.latest_changed_at + after
    return replace(snapshot, partitions_since=since, idle=idle)
