"""The fault hooks (supervisor/testkit/faults.py): they wrap the product's own functions at
named seams, reach the listener only when their condition holds, and leave nothing behind."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from supervisor.testkit import faults


def test_every_point_names_a_function_of_the_product() -> None:
    for point, seam in faults.SEAMS.items():
        assert callable(getattr(seam.owner, seam.name)), point
        assert (seam.before is None) != (seam.after is None), point


def test_install_wraps_every_seam_and_undo_restores_it() -> None:
    originals = {p: getattr(s.owner, s.name) for p, s in faults.SEAMS.items()}
    with faults.installed(lambda _point: None):
        for point, seam in faults.SEAMS.items():
            assert getattr(seam.owner, seam.name) is not originals[point]
    assert {p: getattr(s.owner, s.name) for p, s in faults.SEAMS.items()} == originals


def test_a_point_is_reached_only_when_its_condition_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Owner:
        def finish(self, offsets: dict[str, int], finish: bool) -> str:
            calls.append(f"finish={finish}")
            return "done"

        def publish(self, ok: bool) -> Any:
            calls.append("publish")
            return SimpleNamespace(ok=ok)

    seams = {
        "before": faults.Seam(Owner, "finish", before=lambda _s, _o, finish: bool(finish)),
        "after": faults.Seam(Owner, "publish", after=lambda result: result.ok),
    }
    monkeypatch.setattr(faults, "SEAMS", seams)
    with faults.installed(calls.append):
        owner = Owner()
        assert owner.finish({"0": 1}, False) == "done"
        assert owner.finish({"0": 1}, True) == "done"
        owner.publish(False)
        owner.publish(True)
    assert calls == ["finish=False", "before", "finish=True", "publish", "publish", "after"]


def test_the_killer_ignores_a_point_its_file_does_not_name(tmp_path: Any) -> None:
    armed = tmp_path / "fault"
    kill = faults.killer(armed)
    kill(faults.PUBLISH_COMMITTED)  # no file: goes on
    armed.write_text(faults.TASK_RECORDED)
    kill(faults.PUBLISH_COMMITTED)  # another point: goes on


def test_the_wrapped_functions_are_called_only_where_the_points_are() -> None:
    """A point wraps a function, so a new caller of it would reach the point too: the rollover
    alone calls checkpoint_group through the executor, and only a finishing checkpoint_group
    sets end offsets."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "supervisor"
    callers = {
        str(path.relative_to(root)): path.read_text().count("checkpoint_group(")
        for path in root.rglob("*.py")
        if "testkit" not in path.parts
    }
    assert {p: n for p, n in callers.items() if n} == {
        "controller/execute.py": 1,
        "services/checkpoint.py": 2,  # its definition, and checkpoint_requested's finish=False
    }
    setters = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if ".set_end_offsets(" in path.read_text() and "testkit" not in path.parts
    }
    assert setters == {"services/checkpoint.py"}
