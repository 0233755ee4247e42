"""Druid's rowStats moving averages (tasks/runtime/rates.py): rates a second over 1, 5 and
15 minutes, weighed as Dropwizard's meters weigh them."""

from __future__ import annotations

import math

import pytest

from tasks.runtime.rates import TICK_S, WINDOWS, MovingRates

NAMES = ["processed", "unparseable"]


def test_nothing_is_averaged_before_the_first_tick() -> None:
    rates = MovingRates(NAMES, now=0.0)
    rates.add({"processed": 100}, now=1.0)
    assert rates.averages(now=4.9) == {w: dict.fromkeys(NAMES, 0.0) for w in WINDOWS}


def test_the_first_tick_sets_every_window_to_its_rate() -> None:
    rates = MovingRates(NAMES, now=0.0)
    rates.add({"processed": 100, "unparseable": 5}, now=1.0)
    averaged = rates.averages(now=TICK_S)
    for window in WINDOWS:
        assert averaged[window] == {"processed": 20.0, "unparseable": 1.0}


def test_a_steady_rate_stays_and_a_stop_decays_fastest_in_the_shortest_window() -> None:
    rates = MovingRates(NAMES, now=0.0)
    for tick in range(1, 25):  # 10 a second for two minutes
        rates.add({"processed": 50}, now=tick * TICK_S - 0.5)
    steady = rates.averages(now=24 * TICK_S)
    assert all(steady[w]["processed"] == pytest.approx(10.0) for w in WINDOWS)
    later = rates.averages(now=24 * TICK_S + 60)  # a minute with nothing read: 12 ticks
    for window, span in WINDOWS.items():
        kept = math.exp(-TICK_S / span) ** 12
        assert later[window]["processed"] == pytest.approx(10.0 * kept)
    assert later["1m"]["processed"] < later["5m"]["processed"] < later["15m"]["processed"]
    assert later["1m"]["processed"] == pytest.approx(10.0 / math.e)  # a minute: 1/e of it


def test_counts_land_in_the_tick_they_happened_in_however_late_it_is_asked() -> None:
    """Asked every tick or once after ten, the same counts at the same moments give the
    same averages."""
    often, seldom = MovingRates(NAMES, 0.0), MovingRates(NAMES, 0.0)
    moments = [(2.0, 30), (7.0, 0), (11.0, 90), (33.0, 15)]
    for at, count in moments:
        often.add({"processed": count}, at)
        often.averages(at)
        seldom.add({"processed": count}, at)
    for at in range(0, 55, 5):
        often.averages(float(at))
    final_often, final_seldom = often.averages(55.0), seldom.averages(55.0)
    for window in WINDOWS:
        assert final_seldom[window]["processed"] == pytest.approx(final_often[window]["processed"])


def test_a_rate_moves_towards_a_new_one_by_its_windows_weight() -> None:
    rates = MovingRates(NAMES, now=0.0)
    rates.add({"processed": 50}, now=1.0)  # 10 a second
    rates.averages(now=TICK_S)
    rates.add({"processed": 150}, now=6.0)  # 30 a second in the next tick
    after = rates.averages(now=2 * TICK_S)
    for window, span in WINDOWS.items():
        weight = 1 - math.exp(-TICK_S / span)
        assert after[window]["processed"] == pytest.approx(10 + weight * 20)
