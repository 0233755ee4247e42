"""Slopes of a process's memory over a run in which it is restarted (the soak's task host is
SIGKILLed every ten minutes, its overlord stopped and started once).

A least-squares line through every sample of such a series fits its teeth, not its trend:
each life starts low and climbs while the process warms up (the JVM's heap, the caches), so
the slope says where in its life the process was when the run began and ended. Instead each
life is fitted on its own samples once it has warmed up, with one slope for all the lives and
an intercept of each life's own (`within_per_h`: does a process grow while it lives?), and
the lives' means are fitted against their mean times (`across_per_h`: is each life heavier
than the one before?).
"""

from __future__ import annotations

from typing import Any


def by_life(
    series: list[tuple[float, int | None, float]],
) -> tuple[list[tuple[float, float]], list[float]]:
    """Samples (seconds, pid, value) as points and the times each life began (when a pid was
    first seen); samples without a pid (no process then) are left out."""
    points: list[tuple[float, float]] = []
    starts: list[float] = []
    last: int | None = None
    for t, pid, value in sorted(series, key=lambda sample: sample[0]):
        if pid is None:
            continue
        if pid != last:
            starts.append(t)
            last = pid
        points.append((t, value))
    return points, starts


def lives(
    points: list[tuple[float, float]], starts: list[float], warmup_s: float
) -> list[list[tuple[float, float]]]:
    """`points` (seconds, value) cut at each of `starts` (when the process was started, the
    first included), each piece without its first `warmup_s`; points before the first start
    and a piece with fewer than three points are left out."""
    bounds = sorted(starts)
    pieces: dict[int, list[tuple[float, float]]] = {}
    for t, v in sorted(points):
        life = sum(1 for start in bounds if start <= t)
        if not life or t < bounds[life - 1] + warmup_s:
            continue
        pieces.setdefault(life, []).append((t, v))
    return [piece for _, piece in sorted(pieces.items()) if len(piece) >= 3]


def life_slopes(
    points: list[tuple[float, float]], starts: list[float], warmup_s: float
) -> dict[str, Any]:
    """`within_per_h`: the common slope of the lives (value per hour), each about its own mean;
    `across_per_h`: the slope of the lives' means (nan with fewer than three lives);
    `mean`: of the warmed samples; `lives`: how many."""
    found = lives(points, starts, warmup_s)
    numerator = denominator = 0.0
    centres: list[tuple[float, float]] = []
    for piece in found:
        mean_t = sum(t for t, _ in piece) / len(piece)
        mean_v = sum(v for _, v in piece) / len(piece)
        numerator += sum((t - mean_t) * (v - mean_v) for t, v in piece)
        denominator += sum((t - mean_t) ** 2 for t, _ in piece)
        centres.append((mean_t, mean_v))
    within = numerator / denominator * 3600 if denominator else float("nan")
    across = slope_per_h(centres) if len(centres) >= 3 else float("nan")
    values = [v for piece in found for _, v in piece]
    return {
        "within_per_h": within,
        "across_per_h": across,
        "mean": sum(values) / len(values) if values else float("nan"),
        "lives": len(found),
    }


def slope_per_h(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) in value per hour."""
    if len(points) < 3:
        return float("nan")
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return float("nan")
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 3600
