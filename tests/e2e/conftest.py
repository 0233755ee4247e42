"""What an end-to-end test's failure report carries besides the assertion: the last lines of
each log its overlords and hosts wrote (the `*.log` files at the top of its tmp_path), which
are gone with the clean clone CI ran in."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TAIL_LINES = 80


def log_tails(root: Path, lines: int = TAIL_LINES) -> list[tuple[str, str]]:
    """(file name, its last `lines` lines) for each `*.log` directly under `root`."""
    tails = []
    for log in sorted(root.glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append((log.name, "\n".join(text)))
    return tails


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
    report = yield
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if report.failed and call.when == "call" and isinstance(tmp, Path):
        for name, tail in log_tails(tmp):
            report.sections.append((f"last {TAIL_LINES} lines of {name}", tail))
    return report
