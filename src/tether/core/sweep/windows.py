"""Local-day windows: an owner's IANA zone turns a local date into an exact UTC window.

A window is half-open, ``[start_utc, end_utc)``, and the windows of consecutive local
dates tile UTC with no gap and no overlap (day D ends where day D+1 starts). Durations are
measured in UTC, so a spring-forward day lasts 23 hours and a fall-back day 25 (some zones
have half-hour shifts, or historical ones of odd minutes and seconds).

``window_id`` is deterministic: the same zone and date always give the same id, and a
different zone or date never does (it hashes the zone, the date and the exact bounds).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import msgspec

from tether.errors import BadInputError

#: Missed dates one invocation processes at most, oldest first.
MAX_DATES_PER_RUN = 3

_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")


class BadZoneError(BadInputError):
    """A time zone name that is not an IANA zone tether knows."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown time zone {name!r}: expected an IANA name like Europe/Paris")
        self.name = name


class BadDateError(BadInputError):
    """A local date that is not YYYY-MM-DD."""

    def __init__(self, value: str) -> None:
        super().__init__(f"invalid date {value!r}: expected YYYY-MM-DD")
        self.value = value


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """The exact UTC window of one local date in one zone."""

    timezone_name: str
    local_date: date
    window_id: str
    start_utc: datetime
    end_utc: datetime

    @property
    def hours(self) -> float:
        return (self.end_utc - self.start_utc).total_seconds() / 3600


def zone(name: str) -> ZoneInfo:
    """The zone named ``name``, or BadZoneError (never a fixed offset or a file path)."""
    if not _ZONE_NAME.fullmatch(name) or name in {"localtime", "Factory"}:
        raise BadZoneError(name)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadZoneError(name) from None


def zone_names() -> frozenset[str]:
    """Every zone name the bundled IANA data knows."""
    return frozenset(available_timezones())


def parse_date(value: str) -> date:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise BadDateError(value)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadDateError(value) from None


def local_midnight_utc(tz: ZoneInfo, day: date) -> datetime:
    """The first instant of ``day`` in ``tz``, in UTC.

    A midnight that falls in a spring-forward gap resolves (fold=0) with the offset before
    the shift, which is exactly the instant of the shift: the day's first existing instant.
    """
    return datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)


def window_id(timezone_name: str, day: date, start: datetime, end: datetime) -> str:
    text = f"{timezone_name}|{day.isoformat()}|{_stamp(start)}|{_stamp(end)}"
    return "w1-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def window_for(timezone_name: str, day: date) -> Window:
    """The half-open UTC window of local date ``day`` in zone ``timezone_name``."""
    tz = zone(timezone_name)
    start = local_midnight_utc(tz, day)
    end = local_midnight_utc(tz, day + timedelta(days=1))
    return Window(
        timezone_name=timezone_name,
        local_date=day,
        window_id=window_id(timezone_name, day, start, end),
        start_utc=start,
        end_utc=end,
    )


def local_today(timezone_name: str, now: datetime) -> date:
    """The owner's local date at ``now`` (an aware datetime)."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    return now.astimezone(zone(timezone_name)).date()


def is_complete(window: Window, now: datetime) -> bool:
    """A window is complete once ``now`` has reached its end; today's never is."""
    return now >= window.end_utc


class DatePlan(msgspec.Struct, frozen=True):
    """Which dates a run processes, oldest first, and why the others are not."""

    dates: tuple[date, ...]
    refused: tuple[tuple[date, str], ...] = ()


def plan_dates(
    timezone_name: str,
    now: datetime,
    next_due: date,
    requested: tuple[date, ...] = (),
    limit: int = MAX_DATES_PER_RUN,
) -> DatePlan:
    """The completed local dates to sweep now, at most ``limit``, oldest first.

    ``next_due`` is the day after the cursor (or the owner's first date). Without
    ``requested``, the run catches up from ``next_due`` to yesterday. With it, each date
    must be completed and due in order; the others are refused with a reason code:
    ``partial_window`` (today or later), ``already_complete`` (at or before the cursor),
    ``out_of_order`` (a missed date before it comes first), ``per_run_limit``.
    """
    today = local_today(timezone_name, now)
    due: list[date] = []
    day = next_due
    while day < today and len(due) < limit:
        due.append(day)
        day += timedelta(days=1)
    if not requested:
        return DatePlan(tuple(due))
    chosen: list[date] = []
    refused: list[tuple[date, str]] = []
    expected = next_due
    for day in sorted(set(requested)):
        if day >= today:
            refused.append((day, "partial_window"))
        elif day < next_due:
            refused.append((day, "already_complete"))
        elif day != expected:
            refused.append((day, "out_of_order"))
        elif len(chosen) >= limit:
            refused.append((day, "per_run_limit"))
        else:
            chosen.append(day)
            expected = day + timedelta(days=1)
    return DatePlan(tuple(chosen), tuple(refused))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
