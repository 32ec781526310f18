"""The cron matcher: a table of (schedule, time, due) cases, the grammar's refusals, and
Hypothesis properties with the ``cronsim`` package as the oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.timing.cron_expr import (
    BOUNDS,
    ScheduleError,
    is_due,
    latest_due,
    next_due,
    parse_schedule,
)
from tether.errors import BadInputError

PLUS_ONE = timezone(timedelta(hours=1))


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, *, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# 2026-11-01 is a Sunday.
TABLE = [
    ("* * * * *", utc(2026, 11, 1, 9, 0), True),
    ("0 7 * * *", utc(2026, 11, 1, 7, 0), True),
    ("0 7 * * *", utc(2026, 11, 1, 7, 1), False),
    ("0 7 * * *", utc(2026, 11, 1, 19, 0), False),
    ("30 3 * * 0", utc(2026, 11, 1, 3, 30), True),  # Sunday is 0
    ("30 3 * * 0", utc(2026, 11, 2, 3, 30), False),  # Monday
    ("30 3 * * 1-5", utc(2026, 11, 2, 3, 30), True),
    ("30 3 * * 1-5", utc(2026, 11, 7, 3, 30), False),  # Saturday
    ("*/15 * * * *", utc(2026, 11, 1, 9, 45), True),
    ("*/15 * * * *", utc(2026, 11, 1, 9, 50), False),
    ("0 */6 * * *", utc(2026, 11, 1, 18, 0), True),
    ("0 */6 * * *", utc(2026, 11, 1, 19, 0), False),
    ("0 0 1 * *", utc(2026, 12, 1, 0, 0), True),
    ("0 0 1 * *", utc(2026, 12, 2, 0, 0), False),
    ("0 0 29 2 *", utc(2028, 2, 29, 0, 0), True),  # leap day
    ("0 0 * 2 *", utc(2026, 3, 1, 0, 0), False),
    ("0 0 10-12 * *", utc(2026, 11, 11, 0, 0), True),
    ("0 0 */10 * *", utc(2026, 11, 21, 0, 0), True),  # 1, 11, 21, 31
    ("0 0 */10 * *", utc(2026, 11, 20, 0, 0), False),
    # Both day fields restricted: either may match (Vixie cron).
    ("0 0 13 * 5", utc(2026, 11, 13, 0, 0), True),  # the 13th (a Friday)
    ("0 0 13 * 5", utc(2026, 11, 6, 0, 0), True),  # a Friday, not the 13th
    ("0 0 13 * 5", utc(2026, 11, 7, 0, 0), False),
    # A day field that starts with * joins with AND.
    ("0 0 */2 * 5", utc(2026, 11, 6, 0, 0), False),  # Friday the 6th: day not odd
    ("0 0 */2 * 5", utc(2026, 11, 13, 0, 0), True),  # Friday the 13th
    ("07 07 * * *", utc(2026, 11, 1, 7, 7), True),  # leading zeros
    ("0 9 * * *", datetime(2026, 11, 1, 10, 0, tzinfo=PLUS_ONE), True),  # read in UTC
    ("0 9 * * *", utc(2026, 11, 1, 9, 0, second=59), True),  # any second of the minute
]


@pytest.mark.parametrize(("schedule", "time", "due"), TABLE)
def test_table(schedule: str, time: datetime, due: bool) -> None:
    assert is_due(parse_schedule(schedule), time) is due


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("* * * *", "expected 5 fields"),
        ("* * * * * *", "expected 5 fields"),
        ("60 * * * *", "minute value 60 is not in 0-59"),
        ("* 24 * * *", "hour value 24 is not in 0-23"),
        ("* * 0 * *", "day-of-month value 0 is not in 1-31"),
        ("* * * 13 *", "month value 13 is not in 1-12"),
        ("* * * * 7", "day-of-week value 7 is not in 0-6"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "step 0 is not in 1-60"),
        ("1,2 * * * *", "is not *, a number, n-m or */n"),
        ("1-5/2 * * * *", "is not *, a number, n-m or */n"),
        ("@daily", "expected 5 fields"),
        ("* * * jan *", "is not *, a number"),
        ("0 0 31 2 *", "never due"),
        ("0 0 30-31 2 *", "never due"),
    ],
)
def test_bad_schedules_say_what_is_wrong(schedule: str, problem: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(schedule)
    assert problem in str(info.value)
    assert isinstance(info.value, BadInputError)


def test_latest_due_coalesces_a_late_wake() -> None:
    every_five = parse_schedule("*/5 * * * *")
    # Woke 12 minutes late: one run, for the latest due minute.
    got = latest_due(
        every_five, utc(2026, 11, 1, 9, 0, second=30), utc(2026, 11, 1, 9, 12, second=10)
    )
    assert got == utc(2026, 11, 1, 9, 10)
    # The minute already checked is not due again.
    assert (
        latest_due(
            every_five, utc(2026, 11, 1, 9, 10, second=5), utc(2026, 11, 1, 9, 10, second=50)
        )
        is None
    )
    assert latest_due(
        every_five, utc(2026, 11, 1, 9, 9, second=59), utc(2026, 11, 1, 9, 10)
    ) == utc(2026, 11, 1, 9, 10)


def test_next_due() -> None:
    assert next_due(parse_schedule("30 3 * * 0"), utc(2026, 11, 1, 3, 30)) == utc(
        2026, 11, 8, 3, 30
    )
    leap = next_due(parse_schedule("0 0 29 2 *"), utc(2026, 11, 1))
    assert leap == utc(2028, 2, 29)


# -- cronsim as the oracle -----------------------------------------------------------------


def _field(index: int) -> st.SearchStrategy[str]:
    low, high = BOUNDS[index]
    values = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        values.map(str),
        st.tuples(values, values).map(lambda t: f"{min(t)}-{max(t)}"),
        st.integers(1, high - low + 1).map(lambda n: f"*/{n}"),
    )


schedules = st.tuples(*(_field(i) for i in range(5))).map(" ".join)
minutes = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2090, 12, 31), timezones=st.just(UTC)
).map(lambda t: t.replace(second=0, microsecond=0))


def _oracle(expr: str, after: datetime) -> CronSim | None:
    try:
        return CronSim(expr, after)
    except CronSimError:
        return None


@settings(max_examples=400, deadline=None)
@given(schedules, minutes)
def test_due_agrees_with_cronsim(expr: str, t: datetime) -> None:
    oracle = _oracle(expr, t - timedelta(minutes=1))
    if oracle is None:
        with pytest.raises(ScheduleError):
            parse_schedule(expr)
        return
    assert is_due(parse_schedule(expr), t) is (next(oracle) == t)


@settings(max_examples=300, deadline=None)
@given(schedules, minutes, st.integers(0, 59))
def test_next_due_agrees_with_cronsim(expr: str, t: datetime, second: int) -> None:
    after = t.replace(second=second)
    oracle = _oracle(expr, after)
    if oracle is None:
        return
    assert next_due(parse_schedule(expr), after) == next(oracle)
