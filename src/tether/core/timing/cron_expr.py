"""The cron matcher, pure: five UTC fields, a restricted grammar, no clock.

A schedule is ``minute hour day-of-month month day-of-week``. Each field is ``*``, a
number, ``n-m`` (inclusive, ``n <= m``) or ``*/n`` (every n-th value from the field's
first); day-of-week runs 0-6 with 0 for Sunday. No lists, names, nicknames or seconds.

Day-of-month and day-of-week combine as in Vixie and Debian cron: when either field
starts with ``*`` (``*`` or ``*/n``) a day must match both; when both are restricted, a
day matching either is due. A schedule that can never be due (``0 0 31 2 *``) is refused.

Times come in as values; every function reads them in UTC and at minute resolution.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tether.errors import BadInputError

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
#: (lowest, highest) value of each field, in FIELDS order.
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
#: Longest day of each month (February in a leap year).
_MONTH_DAYS = dict(enumerate((31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), start=1))
#: How far ``next_due`` looks: long enough for a 29 February that must also be a Monday.
HORIZON_DAYS = 366 * 30
#: How many minutes ``latest_due`` looks back at most (a day).
LOOKBACK_MINUTES = 24 * 60

_NUMBER = r"(0|[1-9][0-9]?|0[0-9])"
_FIELD = re.compile(rf"\*|\*/{_NUMBER}|{_NUMBER}|{_NUMBER}-{_NUMBER}")
_MINUTE = timedelta(minutes=1)


class ScheduleError(BadInputError):
    """A schedule outside the grammar, out of range, or never due."""

    def __init__(self, schedule: str, problem: str) -> None:
        super().__init__(f"bad schedule {schedule!r}: {problem}")
        self.schedule = schedule
        self.problem = problem


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the values each field allows."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    #: Both day fields must match (either starts with ``*``); else either may.
    days_and: bool


def _field(schedule: str, text: str, index: int) -> frozenset[int]:
    name = FIELDS[index]
    low, high = BOUNDS[index]
    if not _FIELD.fullmatch(text):
        raise ScheduleError(
            schedule, f"{name} field {text!r} is not *, a number, n-m or */n (UTC, no lists)"
        )
    if text == "*":
        return frozenset(range(low, high + 1))
    if text.startswith("*/"):
        step = int(text[2:])
        if not 1 <= step <= high - low + 1:
            raise ScheduleError(schedule, f"{name} step {step} is not in 1-{high - low + 1}")
        return frozenset(range(low, high + 1, step))
    first, _, last = text.partition("-")
    start, end = int(first), int(last or first)
    for value in (start, end):
        if not low <= value <= high:
            raise ScheduleError(schedule, f"{name} value {value} is not in {low}-{high}")
    if start > end:
        raise ScheduleError(schedule, f"{name} range {text} runs backwards")
    return frozenset(range(start, end + 1))


def parse_schedule(text: str) -> Schedule:
    """Parse a five-field schedule; raise ScheduleError saying which field is wrong."""
    parts = text.split()
    if len(parts) != len(FIELDS):
        raise ScheduleError(text, f"expected 5 fields ({' '.join(FIELDS)}), found {len(parts)}")
    sets = [_field(text, part, i) for i, part in enumerate(parts)]
    minutes, hours, days, months, weekdays = sets
    days_and = parts[2].startswith("*") or parts[4].startswith("*")
    if days_and and min(days) > max(_MONTH_DAYS[m] for m in months):
        raise ScheduleError(
            text, f"day-of-month {min(days)} never falls in the chosen month(s): never due"
        )
    return Schedule(" ".join(parts), minutes, hours, days, months, weekdays, days_and)


def _utc_minute(time: datetime) -> datetime:
    if time.tzinfo is None:
        raise ValueError("cron times must be timezone-aware")
    return time.astimezone(UTC).replace(second=0, microsecond=0)


def _weekday(time: datetime) -> int:
    return (time.weekday() + 1) % 7  # Python: Monday 0; cron: Sunday 0


def day_matches(schedule: Schedule, time: datetime) -> bool:
    if time.month not in schedule.months:
        return False
    dom = time.day in schedule.days
    dow = _weekday(time) in schedule.weekdays
    return (dom and dow) if schedule.days_and else (dom or dow)


def is_due(schedule: Schedule, time: datetime) -> bool:
    """True when the UTC minute holding ``time`` matches the schedule."""
    t = _utc_minute(time)
    return t.minute in schedule.minutes and t.hour in schedule.hours and day_matches(schedule, t)


def latest_due(schedule: Schedule, after: datetime, until: datetime) -> datetime | None:
    """The latest due minute ``m`` with ``minute(after) < m <= minute(until)``, or None.

    What a scheduler that woke late asks: several due minutes in the gap still make one
    run (cron does not queue). The gap is searched at most LOOKBACK_MINUTES back.
    """
    first = _utc_minute(after) + _MINUTE
    t = _utc_minute(until)
    floor = max(first, t - LOOKBACK_MINUTES * _MINUTE)
    while t >= floor:
        if is_due(schedule, t):
            return t
        t -= _MINUTE
    return None


def next_due(schedule: Schedule, after: datetime) -> datetime | None:
    """The first due minute strictly after ``after`` (None past HORIZON_DAYS)."""
    start = _utc_minute(after) + _MINUTE
    day = start.replace(hour=0, minute=0)
    for offset in range(HORIZON_DAYS):
        d = day + timedelta(days=offset)
        if not day_matches(schedule, d):
            continue
        for hour in sorted(schedule.hours):
            for minute in sorted(schedule.minutes):
                candidate = d.replace(hour=hour, minute=minute)
                if candidate >= start:
                    return candidate
    return None
