"""Task runners: how the overlord starts, watches and kills indexing tasks."""

from __future__ import annotations

from supervisor.runner.local import HOST, LocalProcessRunner
from supervisor.runner.shared import SharedAppRunner
from supervisor.settings import Settings

HostRunner = LocalProcessRunner | SharedAppRunner


def host_runner(settings: Settings, host: str = HOST) -> HostRunner:
    """The runner of the tasks that run on this host, as `task_runtime` says."""
    if settings.task_runtime == "shared":
        return SharedAppRunner(settings, host)
    return LocalProcessRunner(settings, host)
