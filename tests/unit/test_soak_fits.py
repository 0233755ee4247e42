"""The soak's memory fits (bench/fits.py): a process restarted during the run is fitted life
by life, so its teeth are not taken for a trend and a leak within each life is."""

from __future__ import annotations

import math

from bench.fits import (
    by_life,
    common_slope_per_h,
    envelopes,
    late_halves,
    life_slopes,
    lives,
    slope_per_h,
)

LIFE_S = 600.0
STARTS = [LIFE_S * k for k in range(6)]  # started at 0, restarted at 10, 20, ... 50 minutes


def _series(leak_mb_per_h: float = 0.0, step_mb_per_life: float = 0.0) -> list[tuple[float, float]]:
    """Samples every 10 s of an hour: each life climbs from 500 MB to 1,800 MB in its first
    minute (warming up), then grows `leak_mb_per_h`; each life sits `step_mb_per_life` above
    the one before."""
    points = []
    for i in range(360):
        t = 10.0 * i + 5
        life, age = divmod(t, LIFE_S)
        warm = min(age / 60.0, 1.0)
        value = 500 + 1300 * warm + leak_mb_per_h * age / 3600 + step_mb_per_life * life
        points.append((t, value))
    return points


def test_the_teeth_of_a_restarted_process_are_not_a_slope() -> None:
    points = _series()
    tail = [p for p in points if p[0] >= 2200]  # a naive fit over the lives' teeth
    assert abs(slope_per_h(tail)) > 100
    found = life_slopes(points, STARTS, warmup_s=120)
    assert found["lives"] == 6
    assert abs(found["within_per_h"]) < 1e-6
    assert abs(found["across_per_h"]) < 1e-6
    assert math.isclose(found["mean"], 1800, rel_tol=1e-9)


def test_growth_within_each_life_is_found_as_it_is() -> None:
    found = life_slopes(_series(leak_mb_per_h=30.0), STARTS, warmup_s=120)
    assert math.isclose(found["within_per_h"], 30.0, rel_tol=1e-6)


def test_each_life_heavier_than_the_last_is_a_slope_across_lives() -> None:
    found = life_slopes(_series(step_mb_per_life=10.0), STARTS, warmup_s=120)
    assert abs(found["within_per_h"]) < 1e-6
    assert math.isclose(found["across_per_h"], 60.0, rel_tol=1e-6)  # 10 MB every 10 minutes


def test_lives_drop_their_warm_up_and_lives_too_short_to_fit() -> None:
    points = [(float(t), 1.0) for t in range(0, 100, 10)]
    pieces = lives(points, [0.0, 45.0, 85.0], warmup_s=20)
    # started at 0: 20..40 past its warm-up; at 45: 65, 75 (two points, left out); at 85:
    # none past its warm-up
    assert pieces == [[(20.0, 1.0), (30.0, 1.0), (40.0, 1.0)]]
    assert math.isnan(life_slopes(points, [0.0, 45.0, 85.0], 20)["across_per_h"])


def test_a_life_is_a_pid_and_samples_without_one_are_left_out() -> None:
    series = [(0.0, None, 0.0), (10.0, 7, 100.0), (20.0, 7, 110.0), (30.0, None, 0.0)]
    series += [(40.0, 9, 50.0), (50.0, 9, 60.0), (60.0, 7, 70.0)]  # a pid used again is a life
    points, starts = by_life(series)
    assert starts == [10.0, 40.0, 60.0]
    assert points == [(10.0, 100.0), (20.0, 110.0), (40.0, 50.0), (50.0, 60.0), (60.0, 70.0)]
    assert by_life([(0.0, None, 0.0)]) == ([], [])


def test_no_life_long_enough_fits_nothing_and_divides_by_nothing() -> None:
    found = life_slopes([(0.0, 1.0), (10.0, 1.0)], [0.0], warmup_s=0)
    assert found["lives"] == 0
    assert all(math.isnan(found[key]) for key in ("within_per_h", "across_per_h", "mean"))


def _saw(rise_mb_per_h: float = 0.0) -> list[tuple[float, float]]:
    """Samples every minute of 50 minutes: a saw from 3.0 to 3.4 MB and back every 7 minutes
    (a file between checkpoints), on a line rising `rise_mb_per_h`."""
    points = []
    for minute in range(50):
        tooth = (minute % 7) / 6 * 0.4
        points.append((600.0 + 60 * minute, 3.0 + tooth + rise_mb_per_h * minute / 60))
    return points


def test_a_bounded_saw_has_flat_envelopes_though_a_line_through_it_slopes() -> None:
    points = _saw()
    assert abs(slope_per_h(points)) > 0.04  # the teeth at the ends tilt it: 1.4 %/h of 3.2 MB
    found = envelopes([points], window_s=600)
    assert found["windows"] == 4  # 50 minutes: four full windows of ten, the fifth cut short
    assert abs(found["peaks_per_h"]) < 1e-9
    assert abs(found["floors_per_h"]) < 1e-9


def test_a_climbing_saw_raises_both_envelopes() -> None:
    found = envelopes([_saw(rise_mb_per_h=1.2)], window_s=600)
    # within 15 %: where in a window its tooth's top or bottom falls moves as the teeth do
    assert math.isclose(found["peaks_per_h"], 1.2, rel_tol=0.15)
    assert math.isclose(found["floors_per_h"], 1.2, rel_tol=0.15)


def test_envelopes_of_lives_share_one_slope_and_skip_lives_too_short() -> None:
    first = [(float(t), 100.0 + t / 3600) for t in range(0, 1800, 10)]  # +1 per hour
    second = [(float(t), 500.0 + t / 3600) for t in range(1800, 3600, 10)]
    short = [(float(t), 900.0) for t in range(3600, 4000, 10)]  # less than two windows
    found = envelopes([first, second, short, []], window_s=600)
    assert found["windows"] == 4  # two full windows in each long life (the third is cut)
    assert math.isclose(found["peaks_per_h"], 1.0, rel_tol=1e-6)
    assert math.isclose(found["floors_per_h"], 1.0, rel_tol=1e-6)
    assert math.isnan(envelopes([short], window_s=600)["peaks_per_h"])


def test_a_plateau_slopes_as_a_whole_but_not_in_its_second_half() -> None:
    # climbs 10 MB over its first 30 minutes, then holds: a line through the hour slopes
    climb = [(t * 60.0, 180.0 + min(t, 30) / 3) for t in range(61)]
    assert slope_per_h(climb) > 5
    assert common_slope_per_h(late_halves([climb])) == 0


def test_a_leak_slopes_as_fast_in_its_second_half() -> None:
    leak = [(t * 60.0, 180.0 + t / 6) for t in range(61)]
    assert math.isclose(common_slope_per_h(late_halves([leak])), 10.0)
    assert math.isclose(slope_per_h(leak), 10.0)


def test_second_halves_are_per_piece_and_skip_those_too_short() -> None:
    first = [(t * 60.0, 100.0 + t) for t in range(10)]  # 60 per hour
    second = [(3600 + t * 60.0, 500.0 + t) for t in range(10)]
    short = [(7200.0, 1.0), (7260.0, 900.0)]
    halves = late_halves([first, second, short, []])
    assert [len(half) for half in halves] == [5, 5]
    assert halves[0][0][0] >= 270  # from the middle of its span (0 to 540 s) on
    assert math.isclose(common_slope_per_h(halves), 60.0)
