"""A simulated clock for the overlord's retention, for the soak (bench/soak.py): a month of
event time compressed into an hour needs drop rules and the kill's buffer period that see
time pass a day a minute too.

`python -m supervisor.testkit.simclock WALL_START ORIGIN SPEED <sluicegate arguments>` runs the
CLI with the leader's RetentionDuty (the rules) and MaintenanceDuty's kill on the clock
`ORIGIN + (now - WALL_START) * SPEED` (epoch seconds); everything else (leases, passes,
taskDuration, snapshot expiry, which compares the snapshots' own commit times) keeps the wall
clock. No production code calls anything here."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any


def simulated(wall_start: float, origin: float, speed: float) -> Callable[[], datetime]:
    def now() -> datetime:
        return datetime.fromtimestamp(origin + (time.time() - wall_start) * speed, UTC)

    return now


def install(clock: Callable[[], datetime]) -> None:
    from supervisor.services import maintenance, retention

    retention_init = retention.RetentionDuty.__init__

    def on_simulated_time(
        self: Any, sessions: Any, lake: Any, fence: Any, _clock: Any, every_s: float
    ) -> None:
        retention_init(self, sessions, lake, fence, clock, every_s)

    setattr(retention.RetentionDuty, "__init__", on_simulated_time)  # noqa: B010
    kill = maintenance.MaintenanceDuty.kill

    def kill_on_simulated_time(self: Any) -> dict[str, int]:
        wall, self.clock = self.clock, clock
        try:
            return kill(self)
        finally:
            self.clock = wall

    setattr(maintenance.MaintenanceDuty, "kill", kill_on_simulated_time)  # noqa: B010


def main(argv: list[str]) -> int:
    from supervisor.cli import main as cli

    install(simulated(float(argv[0]), float(argv[1]), float(argv[2])))
    return cli(argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
