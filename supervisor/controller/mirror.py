"""The consumer-group mirror: a supervisor's committed offsets written to the Kafka consumer
group `<prefix><id>` so Kafka's own lag tools (kafka-consumer-groups.sh, Burrow, exporters)
see it. A mirror: the metadata DB decides; Kafka being away costs the mirror, never the pass
(tried again by the next)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from supervisor.controller.observe import StreamReader
from supervisor.model.fence import Fence
from supervisor.model.views import Snapshot
from supervisor.schemas.spec import SupervisorSpec
from tasks.partitions import Offsets

log = logging.getLogger(__name__)

MIRROR_REFRESH_S = 3600.0  # a consumer group's unchanged offsets written again (Kafka expires
# a memberless group's offsets offsets.retention.minutes, 7 days by default, after their commit)
DEFAULT_GROUP_PREFIX = "sluicegate-"  # Settings.consumer_group_prefix's default


def consumer_group(supervisor_id: str, prefix: str = DEFAULT_GROUP_PREFIX) -> str:
    """The Kafka consumer group that mirrors a supervisor's committed offsets."""
    return f"{prefix}{supervisor_id}"


@dataclass
class Mirrored:
    """What one supervisor's group was last given; touched by its own passes alone."""

    offsets: Offsets | None = None  # the committed offsets its consumer group was last given
    at: float | None = None  # when (monotonic)
    failed: bool = False  # the last try to give them failed (logged once)


class GroupMirror:
    def __init__(self, fence: Fence, monotonic: Callable[[], float], prefix: str) -> None:
        self.fence, self.monotonic, self.prefix = fence, monotonic, prefix

    def write(
        self, stream: StreamReader, snapshot: Snapshot, spec: SupervisorSpec, mirrored: Mirrored
    ) -> None:
        """The committed offsets, when they changed (and every MIRROR_REFRESH_S, before Kafka
        expires a memberless group's offsets), unless ioConfig.consumerGroupOffsets turns the
        mirror off; partitions the topic no longer has are left out. Reset, terminated or
        turned off: the group is deleted. `stream`: the pass's (tests and benchmarks replace
        the reconciler's)."""
        io = spec.spec.ioConfig
        present = set(snapshot.partitions)
        wanted: Offsets = (
            {}
            if snapshot.terminated or not io.consumerGroupOffsets
            else {p: offset for p, offset in snapshot.committed.items() if p in present}
        )
        now = self.monotonic()
        if mirrored.offsets == wanted and (
            not wanted or (mirrored.at is not None and now - mirrored.at < MIRROR_REFRESH_S)
        ):
            return
        sid = snapshot.supervisor_id
        group = consumer_group(sid, self.prefix)
        self.fence.check()  # a deposed leader writes nothing
        try:
            stream.mirror(io.consumerProperties, group, str(io.topic or io.topicPattern), wanted)
        except Exception as exc:
            if not mirrored.failed:
                log.warning("supervisor %s: consumer group %s not updated: %s", sid, group, exc)
            mirrored.failed = True
            return
        if mirrored.failed:
            log.info("supervisor %s: consumer group %s updated again", sid, group)
        mirrored.offsets, mirrored.at, mirrored.failed = dict(wanted), now, False
