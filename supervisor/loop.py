"""A loop service, as Prefect's: a thread that calls `run_once` every `every_s` until stopped.
Cadence, shutdown and the logging of a failed run live here; a loop implements `run_once`
(and may say how a failure is told, `failed`), so its tests call `run_once` directly."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class Loop:
    name = "loop"

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 10) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def run_once(self) -> None:
        raise NotImplementedError

    def failed(self, exc: Exception) -> None:
        """A run raised: logged with its traceback, and the loop goes on."""
        log.exception("%s: a run failed", self.name, exc_info=exc)

    def succeeded(self) -> None:
        """A run ended well (after failures, a loop may say it recovered)."""

    def _run(self) -> None:
        while not self.stopping.wait(self.every_s):
            try:
                self.run_once()
            except Exception as exc:
                self.failed(exc)
            else:
                self.succeeded()
