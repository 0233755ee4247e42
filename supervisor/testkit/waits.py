"""Waiting for a condition, and the statistics the benchmarks print."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T], timeout: float = 120, what: str = "condition", every: float = 0.3
) -> T:
    """Poll until `predicate` returns something truthy, and return it; fail naming what was
    awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def percentile(values: list[float], q: float, nearest_rank: bool = False) -> float:
    """The q-th percentile (0-100) by linear interpolation, or the nearest rank's value (one
    of the values); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if nearest_rank:
        return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
