"""The soak's simulated clock (supervisor/testkit/simclock.py): a day a minute for the
retention rules and the kill, the wall clock for everything else."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from supervisor.model.fence import Unfenced
from supervisor.testkit import simclock


def test_the_simulated_clock_runs_at_its_speed_from_its_origin() -> None:
    origin = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    clock = simclock.simulated(time.time() - 60, origin, 1440)
    assert abs((clock() - datetime(2026, 1, 2, tzinfo=UTC)).total_seconds()) < 60 * 1440 * 0.01


def test_only_the_rules_and_the_kill_take_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisor.services import maintenance, retention

    monkeypatch.setattr(retention.RetentionDuty, "__init__", retention.RetentionDuty.__init__)
    monkeypatch.setattr(maintenance.MaintenanceDuty, "kill", maintenance.MaintenanceDuty.kill)
    moment = datetime(2030, 5, 5, tzinfo=UTC)
    simclock.install(lambda: moment)

    def wall() -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)

    duty = retention.RetentionDuty(None, None, Unfenced(), wall, 10.0)  # type: ignore[arg-type]
    assert duty.clock() == moment
    seen: list[datetime] = []

    class Settings:
        coordinator_period_s = 10.0
        kill_buffer_period = "P1D"
        kill_duration_to_retain = ""

    keeper = maintenance.MaintenanceDuty(None, None, Unfenced(), wall, Settings())  # type: ignore[arg-type]
    monkeypatch.setattr(
        maintenance, "SegmentStates", lambda _s: seen.append(keeper.clock()) or _NoUnused()
    )

    class Sessions:
        def __call__(self) -> Any:
            return self

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *_: Any) -> None:
            return None

    keeper.sessions = Sessions()  # type: ignore[assignment]
    assert keeper.kill() == {}
    assert seen == [moment] and keeper.clock() == wall()  # the wall clock again after


class _NoUnused:
    def datasources_with_unused(self) -> list[str]:
        return []
