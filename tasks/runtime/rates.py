"""Moving averages of a task's row counts: Druid's rowStats `movingAverages`, the rates a second
over the last minute, five and fifteen (`1m`, `5m`, `15m`), exponentially weighted as Druid's
Dropwizard meters weigh them (a tick every 5 s; each tick moves a window's rate towards the
tick's own rate by 1 - e^(-5 s / window); the first tick sets it)."""

from __future__ import annotations

import math
from collections.abc import Mapping

TICK_S = 5.0
WINDOWS = {"1m": 60.0, "5m": 300.0, "15m": 900.0}


class MovingRates:
    """Rates of named counters. `add` the counts as they happen and read `averages`; both tick
    to their moment first, so counts land in the tick they happened in, however seldom anyone
    asks. Not thread-safe: the indexer calls it under its lock."""

    def __init__(self, names: list[str], now: float) -> None:
        self.names = list(names)
        self.ticked_at = now
        self.pending = dict.fromkeys(self.names, 0.0)  # counted since the last tick
        self.rates = {window: dict.fromkeys(self.names, 0.0) for window in WINDOWS}
        self.started = False  # the first tick sets the rates; later ones weigh them

    def add(self, counts: Mapping[str, float], now: float) -> None:
        self._tick(now)
        for name in self.names:
            self.pending[name] += counts.get(name, 0)

    def averages(self, now: float) -> dict[str, dict[str, float]]:
        self._tick(now)
        return {window: dict(rates) for window, rates in self.rates.items()}

    def _tick(self, now: float) -> None:
        ticks = int((now - self.ticked_at) // TICK_S)
        if ticks <= 0:
            return
        self.ticked_at += ticks * TICK_S
        for window, span in WINDOWS.items():
            kept = math.exp(-TICK_S / span)  # what a tick keeps of the rate before it
            rates = self.rates[window]
            for name in self.names:
                instant = self.pending[name] / TICK_S
                rate = (
                    instant
                    if not self.started
                    else rates[name] + (1 - kept) * (instant - rates[name])
                )
                rates[name] = rate * kept ** (ticks - 1)  # the ticks after it counted nothing
        self.started = True
        self.pending = dict.fromkeys(self.names, 0.0)
