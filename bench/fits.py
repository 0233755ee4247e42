"""Slopes of a process's memory over a run in which it is restarted (the soak's task host is
SIGKILLed every ten minutes, its overlord stopped and started once).

A least-squares line through every sample of such a series fits its teeth, not its trend:
each life starts low and climbs while the process warms up (the JVM's heap, the caches), so
the slope says where in its life the process was when the run began and ended. Instead each
life is fitted on its own samples once it has warmed up, with one slope for all the lives and
an intercept of each life's own (`within_per_h`: does a process grow while it lives?), and
the lives' means are fitted against their mean times (`across_per_h`: is each life heavier
than the one before?).

A saw (a table trimmed to its retention window every few minutes, SQLite's file between
checkpoints, a log cut at its size) is bounded, yet a line through an hour of it slopes by
up to its height over the hour, depending on where its teeth fall at the ends. Its envelopes
tell growth from teeth: the greatest and the least value of each window (`envelopes`, ten
minutes in the soak: a kill period, two of the retention windows), fitted as lines
(`peaks_per_h`, `floors_per_h`). A bounded saw has both flat; a leak raises both.

A process that settles (allocators reaching their high-water marks, caches filling to their
bounds) climbs early and then levels off, and a line through all of it slopes by the climb.
`late_halves` keeps each piece's second half, whose slope tells a plateau from a leak: a leak
climbs as fast late as early.
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
    within = common_slope_per_h(found)
    centres = [_centre(piece) for piece in found]
    across = slope_per_h(centres) if len(centres) >= 3 else float("nan")
    values = [v for piece in found for _, v in piece]
    return {
        "within_per_h": within,
        "across_per_h": across,
        "mean": sum(values) / len(values) if values else float("nan"),
        "lives": len(found),
    }


def common_slope_per_h(pieces: list[list[tuple[float, float]]]) -> float:
    """One least-squares slope (value per hour) for several pieces of (seconds, value), each
    about its own mean: nan when no piece spans any time."""
    numerator = denominator = 0.0
    for piece in pieces:
        mean_t, mean_v = _centre(piece)
        numerator += sum((t - mean_t) * (v - mean_v) for t, v in piece)
        denominator += sum((t - mean_t) ** 2 for t, _ in piece)
    return numerator / denominator * 3600 if denominator else float("nan")


def _centre(piece: list[tuple[float, float]]) -> tuple[float, float]:
    return sum(t for t, _ in piece) / len(piece), sum(v for _, v in piece) / len(piece)


def envelopes(pieces: list[list[tuple[float, float]]], window_s: float) -> dict[str, Any]:
    """Each piece (a life, or the whole series) cut into windows of `window_s` from its first
    point; the greatest and the least value of each full window, at the window's middle, are
    fitted with one slope over the pieces (`peaks_per_h`, `floors_per_h`); `windows`: how many
    were fitted. A window the piece ends inside is left out, and so is a piece of fewer than
    two full windows."""
    peaks: list[list[tuple[float, float]]] = []
    floors: list[list[tuple[float, float]]] = []
    for piece in pieces:
        ordered = sorted(piece)
        if not ordered:
            continue
        first, last = ordered[0][0], ordered[-1][0]
        full = int((last - first) // window_s)
        windows: dict[int, list[float]] = {}
        for t, v in ordered:
            index = int((t - first) // window_s)
            if index < full:
                windows.setdefault(index, []).append(v)
        if len(windows) < 2:
            continue
        middles = {k: first + (k + 0.5) * window_s for k in windows}
        peaks.append([(middles[k], max(vs)) for k, vs in sorted(windows.items())])
        floors.append([(middles[k], min(vs)) for k, vs in sorted(windows.items())])
    return {
        "peaks_per_h": common_slope_per_h(peaks),
        "floors_per_h": common_slope_per_h(floors),
        "windows": sum(len(piece) for piece in peaks),
    }


def late_halves(pieces: list[list[tuple[float, float]]]) -> list[list[tuple[float, float]]]:
    """Each piece's points from the middle of its time span on; a half of fewer than three
    points is left out."""
    halves: list[list[tuple[float, float]]] = []
    for piece in pieces:
        ordered = sorted(piece)
        if not ordered:
            continue
        middle = (ordered[0][0] + ordered[-1][0]) / 2
        half = [(t, v) for t, v in ordered if t >= middle]
        if len(half) >= 3:
            halves.append(half)
    return halves


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
