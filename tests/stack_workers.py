"""`make test`'s two pytest-xdist workers (`-n 2 --dist loadgroup`): every test on the real
stack runs on one of them, one after another in collection order, as a single `pytest` runs
it; two Spark suites at once on two cores would slow each other past what their waits allow.
The other worker takes the rest: the API, security and unit tests, one at a time as each ends.

A test is on the stack when it takes one of the stack's fixtures (STACK) or is marked `kafka`
or `spark`. Only the workers see fixtures, so each worker writes the stack's test ids where
the controller's scheduler reads them (xdist's own `xdist_group` mark cannot carry this: with
pytest 9.2 the id suffix it groups by no longer reaches the controller).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

# The real stack's fixtures: a test that takes one runs Spark, Kafka or a server of the stack
STACK = frozenset({"jar_cache", "kafka", "secure_kafka", "spark", "s3", "registry"})
FOLDER = "SLUICEGATE_TEST_STACK_IDS"  # where the workers write the ids (set by the controller)
GROUP = "stack"
_folder_key = pytest.StashKey[str]()
__all__ = [
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_unconfigure",
    "pytest_xdist_make_scheduler",
]


def on_stack(item: pytest.Item) -> bool:
    marked = any(item.iter_markers("kafka")) or any(item.iter_markers("spark"))
    return marked or bool(STACK.intersection(getattr(item, "fixturenames", ())))


def _distributed(config: pytest.Config) -> bool:
    return config.getoption("dist", "no") == "loadgroup" and not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if _distributed(config):  # the controller, before it starts its workers
        folder = tempfile.mkdtemp(prefix="sluicegate-stack-ids-")
        config.stash[_folder_key] = folder
        os.environ[FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_folder_key, None)
    if folder is not None:
        os.environ.pop(FOLDER, None)
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    folder = os.environ.get(FOLDER)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if folder is None or workerinput is None:
        return
    ids = "\n".join(item.nodeid for item in items if on_stack(item))
    path = Path(folder) / str(workerinput["workerid"])
    scratch = path.with_suffix(".part")
    scratch.write_text(ids)
    scratch.replace(path)  # whole or not at all when the controller reads it


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, called only with it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if not _distributed(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class StackScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with one scope for the stack's tests (handed to one
        worker as a whole) and a scope of its own for each other test."""

        stack: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.stack is None:  # the workers have all reported their collection now
                folder = Path(os.environ[FOLDER])
                parts = [p.read_text().split("\n") for p in folder.iterdir() if not p.suffix]
                self.stack = frozenset(i for part in parts for i in part if i)
            return GROUP if nodeid in self.stack else nodeid

    return StackScheduling(config, log)
