import pytest

from tasks.spec.periods import duration_millis, parse_period


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("PT1H", 3_600_000),
        ("PT30S", 30_000),
        ("PT0.5S", 500),
        ("PT1M30S", 90_000),
        ("P1D", 86_400_000),
        ("P1W", 604_800_000),
        ("P1DT2H", 93_600_000),
        ("pt10m", 600_000),
        ("P2147483647D", 2_147_483_647 * 86_400_000),
    ],
)
def test_fixed_periods(text: str, millis: int) -> None:
    assert parse_period(text).to_millis() == millis


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1X", "P1.5D", "PT-1S", "P1DT"])
def test_malformed_periods(text: str) -> None:
    with pytest.raises(ValueError, match="not an ISO-8601 period"):
        parse_period(text)


def test_calendar_periods_have_no_fixed_length() -> None:
    assert parse_period("P1M").months == 1
    with pytest.raises(ValueError, match="years or months"):
        duration_millis("P1M")


def test_zero_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than zero"):
        duration_millis("PT0S")
