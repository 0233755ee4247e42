"""Freshness as a query sees it (bench/freshness.py's `queryable` half): how long from a
record's produce time until `/druid/v2/sql` counts it, from the rows the task holds, with
taskDuration PT1H and no intermediate handoff (nothing is published in the window).

Every PROBE_EVERY-th record carries a `probe` dimension, its sequence number. A poller asks
the SQL API for the probes produced since the window began, one query after another
(POLL_S apart); a probe's freshness is the time the first answer holding it arrived minus its
produce time (the row's timestamp), so it includes the query's own time. A probe of the
window no answer held by the end counts as never visible (an infinite freshness)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

PROBE_EVERY = 2000  # at 20,000 records/s: ten probes a second
POLL_S = 0.1
PAGES = [f"Page {n}" for n in range(500)]


def probe_record(n: int, now: float) -> bytes:
    row: dict[str, Any] = {
        "ts": int(now * 1000),
        "page": PAGES[n % 500],
        "user": f"u{n % 97}",
        "added": n % 800,
    }
    if n % PROBE_EVERY == 0:
        row["probe"] = str(n)
    return json.dumps(row).encode()


class Poller:
    """Asks the SQL API for the probes of `datasource` produced at or after `since` (epoch
    seconds, set when the window starts) until stopped, on a thread of its own."""

    def __init__(self, url: str, datasource: str) -> None:
        self.url, self.datasource = url, datasource
        self.since = 0.0
        self.produced: dict[int, float] = {}  # probe -> produce time (epoch s)
        self.visible: dict[int, float] = {}  # probe -> the first answer holding it (epoch s)
        self.query_s: list[float] = []
        self.refused = 0  # answers other than a 200 (e.g. not found before any row is held)
        self.lacking = 0  # answers whose response context named task groups left out
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sql-poller", daemon=True)

    def start(self) -> Poller:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)

    def _query(self) -> str:
        since_ms = int(self.since * 1000)
        return (
            f'SELECT probe, TIMESTAMP_TO_MILLIS(__time) AS ms FROM "{self.datasource}" '
            f"WHERE probe IS NOT NULL AND __time >= MILLIS_TO_TIMESTAMP({since_ms})"
        )

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as api:
            while not self.stopping.is_set():
                asked = time.time()
                answer = api.post("/druid/v2/sql", json={"query": self._query()})
                arrived = time.time()
                if answer.status_code != 200:
                    self.refused += 1
                else:
                    self.query_s.append(arrived - asked)
                    self.lacking += "missingTaskGroups" in answer.headers.get(
                        "X-Druid-Response-Context", ""
                    )
                    for row in answer.json():
                        probe = int(row["probe"])
                        self.produced.setdefault(probe, row["ms"] / 1000)
                        self.visible.setdefault(probe, arrived)
                self.stopping.wait(max(0.0, POLL_S - (time.time() - asked)))

    def seen_since(self, start: float) -> bool:
        return any(produced >= start for produced in self.produced.values())

    def freshness(self, first: int, last: int) -> list[float]:
        """Seconds from produce to visible of every probe numbered in [first, last); one never
        seen is infinite."""
        values: list[float] = []
        for probe in range(
            (first + PROBE_EVERY - 1) // PROBE_EVERY * PROBE_EVERY, last, PROBE_EVERY
        ):
            if probe in self.visible:
                values.append(self.visible[probe] - self.produced[probe])
            else:
                values.append(float("inf"))
        return values
