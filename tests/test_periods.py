"""Named periods: "last week", "in March", "two months ago" as windows around a given now."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tether.core.recall.periods import Period, find_period, without

# A Tuesday afternoon.
NOW = datetime(2023, 5, 30, 15, 0, tzinfo=UTC)

nows = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(2090, 12, 31),
    timezones=st.sampled_from(
        [UTC, ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo")]
    ),
)


def days(p: Period) -> tuple[date, date]:
    """First and last day of a whole-day period."""
    return p.start.date(), (p.end - timedelta(hours=1)).date()


def period(text: str, now: datetime = NOW) -> Period:
    p = find_period(text, now)
    assert p is not None, text
    return p


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("what did I cook yesterday?", date(2023, 5, 29), date(2023, 5, 29)),
        ("the day before yesterday", date(2023, 5, 28), date(2023, 5, 28)),
        ("what did I buy 10 days ago?", date(2023, 5, 18), date(2023, 5, 22)),
        ("an event two weeks ago", date(2023, 5, 12), date(2023, 5, 20)),
        ("a month ago", date(2023, 4, 22), date(2023, 5, 8)),
        ("a few days ago", date(2023, 5, 26), date(2023, 5, 28)),
        ("where did I go last week?", date(2023, 5, 22), date(2023, 5, 28)),
        ("earlier this week", date(2023, 5, 29), date(2023, 6, 4)),
        ("last month", date(2023, 4, 1), date(2023, 4, 30)),
        ("this year", date(2023, 1, 1), date(2023, 12, 31)),
        ("in the past month", date(2023, 4, 30), date(2023, 5, 30)),
        ("in the last two months", date(2023, 3, 30), date(2023, 5, 30)),
        ("the past few months", date(2023, 2, 28), date(2023, 5, 30)),
        ("over the past 3 weeks", date(2023, 5, 9), date(2023, 5, 30)),
        ("lunch last Tuesday", date(2023, 5, 23), date(2023, 5, 23)),
        ("on Friday", date(2023, 5, 26), date(2023, 5, 26)),
        ("appointments in March", date(2023, 3, 1), date(2023, 3, 31)),
        ("in June", date(2022, 6, 1), date(2022, 6, 30)),  # the latest June not after now
        ("in May", date(2023, 5, 1), date(2023, 5, 31)),
        ("during February 2021", date(2021, 2, 1), date(2021, 2, 28)),
        ("since March", date(2023, 3, 1), date(2023, 5, 30)),
        ("since the start of the year", date(2023, 1, 1), date(2023, 5, 30)),
        ("in 2022", date(2022, 1, 1), date(2022, 12, 31)),
        ("what did I eat today", date(2023, 5, 30), date(2023, 5, 30)),
    ],
)
def test_named_periods(text: str, first: date, last: date) -> None:
    assert days(period(text)) == (first, last)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "the Sunday mass at St. Mary's",  # a weekday name alone is not a period
        "you may like it",
        "which airlines did I fly before today?",
        "an hour ago",
        "how many days did the trip take?",
        "the march for climate",
    ],
)
def test_no_period(text: str) -> None:
    assert find_period(text, NOW) is None


def test_the_first_period_named_wins() -> None:
    assert period("in March, or was it last week?").text == "in March"


def test_last_weekday_asked_on_that_weekday_is_a_week_ago() -> None:
    assert days(period("last Tuesday")) == (date(2023, 5, 23), date(2023, 5, 23))


def test_calendar_words_are_read_in_nows_time_zone() -> None:
    # 00:30 on Wednesday in Tokyo is still Tuesday in UTC: "yesterday" is Tokyo's Tuesday.
    tokyo = datetime(2023, 5, 31, 0, 30, tzinfo=ZoneInfo("Asia/Tokyo"))
    p = period("yesterday", tokyo)
    assert p.start == datetime(2023, 5, 30, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert datetime(2023, 5, 30, 16, tzinfo=UTC) not in p  # 01:00 Wednesday in Tokyo
    assert datetime(2023, 5, 30, 2, tzinfo=UTC) in p


def test_a_period_is_aware_and_non_empty() -> None:
    with pytest.raises(ValueError, match="aware"):
        find_period("yesterday", datetime(2023, 5, 30))
    with pytest.raises(ValueError, match="ends after"):
        Period(NOW, NOW, "x")


def test_without_keeps_month_and_weekday_names() -> None:
    assert without("what did I buy 10 days ago?", period("10 days ago")) == "what did I buy ?"
    assert without("doctor visits in March", period("in March")) == "doctor visits March"
    assert without("lunch last Tuesday", period("last Tuesday")) == "lunch Tuesday"


@settings(max_examples=300, deadline=None)
@given(st.text(), nows)
@example("in february 29 days ago", datetime(2024, 3, 31, tzinfo=UTC))
@example("999 years ago", datetime(1990, 1, 1, tzinfo=UTC))
@example("in 1900 since december", datetime(1990, 1, 1, tzinfo=UTC))
def test_any_text_is_a_period_or_none(text: str, now: datetime) -> None:
    p = find_period(text, now)
    if p is not None:
        assert p.start < p.end
        assert p.text in text
        assert p.start.tzinfo is not None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.sampled_from(["day", "week"]), nows)
def test_n_units_ago_is_centred_on_that_day(n: int, unit: str, now: datetime) -> None:
    step = {"day": 1, "week": 7}[unit]
    p = period(f"{n} {unit}s ago", now)
    center = now.date() - timedelta(days=n * step)
    first, last = days(p)
    assert first <= center <= last
    assert (center - first) == (last - center)  # symmetric slack
    assert (last - first).days <= max(2, n * step)  # a quarter each side, at least a day
    if n * step >= 4:
        assert now not in p  # "ago" never means today


@settings(max_examples=200, deadline=None)
@given(nows)
def test_last_week_is_the_monday_to_sunday_before_this_one(now: datetime) -> None:
    first, last = days(period("last week", now))
    assert first.weekday() == 0
    assert (last - first).days == 6
    assert last < now.date() - timedelta(days=now.weekday()) <= last + timedelta(days=7)


@settings(max_examples=200, deadline=None)
@given(nows, st.sampled_from(["monday", "Tuesday", "wed", "Thursday", "friday", "sat", "sun"]))
def test_last_weekday_is_that_day_within_the_week_before(now: datetime, name: str) -> None:
    first, last = days(period(f"last {name}", now))
    assert first == last
    assert first.strftime("%a").lower() == name[:3].lower()
    assert 1 <= (now.date() - first).days <= 7


@settings(max_examples=200, deadline=None)
@given(nows, st.integers(1, 12))
def test_in_a_month_is_the_latest_such_month_not_after_now(now: datetime, month: int) -> None:
    name = date(2000, month, 1).strftime("%B")
    first, last = days(period(f"in {name}", now))
    assert first.month == last.month == month
    assert first.day == 1
    assert (last + timedelta(days=1)).day == 1
    assert first <= now.date()
    assert now.date() - first < timedelta(days=366)


@settings(max_examples=200, deadline=None)
@given(nows)
def test_periods_start_at_local_midnight(now: datetime) -> None:
    for text in ("yesterday", "last week", "in March", "2 days ago", "this month"):
        p = period(text, now)
        assert p.start.timetz().replace(tzinfo=None) == time()
        assert p.start.tzinfo == now.tzinfo
