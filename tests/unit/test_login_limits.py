"""The login limits' buckets on a clock of the test's own."""

from __future__ import annotations

from supervisor.services.login_limits import LoginLimits, Rate, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def limits(clock: Clock) -> LoginLimits:
    return LoginLimits(Rate(burst=3, per_s=0.5), Rate(burst=5, per_s=0.25), 100.0, clock)


def test_an_address_gets_its_burst_then_the_refill_rate() -> None:
    clock = Clock()
    limited = limits(clock)
    for _ in range(3):
        assert limited.wait_s("a", None) == 0
        limited.failed("a", None)
    assert limited.wait_s("a", None) == 2.0  # one failure back each 2 s
    assert limited.wait_s("b", None) == 0  # another address is not slowed
    clock.now = 2.0
    assert limited.wait_s("a", None) == 0
    limited.failed("a", None)
    assert limited.wait_s("a", None) == 2.0
    clock.now = 1000.0  # the limit lifts by itself, up to the burst and no more
    for _ in range(3):
        limited.failed("a", None)
    assert limited.wait_s("a", None) > 0


def test_a_user_tried_from_many_addresses_is_slowed_except_where_it_logged_in() -> None:
    clock = Clock()
    limited = limits(clock)
    limited.succeeded("home", "erin")
    for address in ("x1", "x2", "x3", "x4", "x5"):
        limited.failed(address, "erin")
    assert limited.wait_s("x6", "erin") == 4.0  # a new address waits for the user's bucket
    assert limited.wait_s("x6", "frank") == 0  # another user does not
    assert limited.wait_s("home", "erin") == 0  # where erin logged in lately: not slowed
    limited.failed("home", "erin")  # and its own failures do not spend erin's bucket
    assert limited.wait_s("x6", "erin") == 4.0


def test_a_trusted_address_and_user_have_a_bucket_of_their_own() -> None:
    clock = Clock()
    limited = limits(clock)
    limited.succeeded("shared", "erin")
    for _ in range(3):
        limited.failed("shared", "mallory")  # an attacker behind the same address
    assert limited.wait_s("shared", "mallory") == 2.0
    assert limited.wait_s("shared", "erin") == 0  # erin logs in there as before
    for _ in range(3):
        limited.failed("shared", "erin")  # guessing erin's password there is slowed too
    assert limited.wait_s("shared", "erin") == 2.0
    clock.now = 200.0  # the trust lapses: erin's tries there are like anyone's again
    assert limited.wait_s("shared", "erin") == 0
    limited.failed("shared", "erin")
    assert limited.wait_s("other", "frank") == 0


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert [retry_after(s) for s in (0.01, 1.0, 1.2, 59.5)] == ["1", "1", "2", "60"]
