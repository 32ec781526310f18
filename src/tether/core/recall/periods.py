"""Named periods in a question ("last week", "in March", "two months ago") as time windows.

Pure date logic: the reference time comes in as a value (recall passes the time it runs
at; the LongMemEval benchmark passes the question's date), and calendar words are read in
that value's time zone (a Tuesday is the owner's Tuesday when ``now`` is in their zone).

What is understood (English, case-insensitive; the first expression found wins):

- ``N days|weeks|months|years ago`` (N in digits or words, "a", "an", "a couple of",
  "a few"): the day that far back, give or take a quarter of the distance (at least a day,
  so "a month ago" is 30 +- 7 days);
- ``yesterday``; ``today`` (not after "before" or "until"); ``the day before yesterday``;
- ``last|this week|month|year`` (calendar weeks start on Monday), ``earlier this ...``;
- ``(in|over|during) the last|past N days|weeks|months|years`` and ``the past week``:
  from that far back until now ("the past few months" is three);
- ``last|on <weekday>``: the latest such day before today ("last Tuesday" asked on a
  Tuesday is a week ago);
- ``in|during|last|since <Month> [year]``: that month (the latest one not after now), or
  from its start until now for "since"; ``in <year>``; ``since the start of the year``;
- a day: ``on May 30[, 2023]``, ``on the 30th of May [2023]``, ``2023-05-30``,
  ``2023/05/30`` (without a year: the latest such day not after today).

"recently" and "lately" name no period: read as the last 30 days they cost a LongMemEval
tuning question ("the streaming service I have been using lately" was named months
before) and gained none (benchmarks/RESULTS.md, "Recall over a long life").

A period only ever re-orders what the words of the question found (``core.recall.ranking``):
people misremember dates and talk about events days after they happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "few": 3,
    "a few": 3,
    "couple": 2,
    "a couple": 2,
    "a couple of": 2,
    "several": 3,
}
_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_WEEKDAYS = {
    name: n
    for n, names in enumerate(
        (
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        )
    )
    for name in names
}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
#: Fraction of the distance an "N units ago" may be off by (at least one day).
SLACK = 0.25

_NUM = r"(\d{1,3}|a couple of|a couple|a few|couple|few|several|an?|" + "|".join(
    sorted((k for k in _NUMBERS if " " not in k and len(k) > 2), key=len, reverse=True)
)
_NUM += r")"
_UNIT = r"(day|week|month|year)s?"
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_WEEKDAY = r"(" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\b"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("ago", rf"\b{_NUM}[\s-]+{_UNIT}\s+ago\b"),
        ("day_before_yesterday", r"\bday before yesterday\b"),
        ("yesterday", r"\byesterday\b"),
        ("past_n", rf"\b(?:last|past|previous)\s+{_NUM}\s+{_UNIT}\b"),
        ("past_one", r"\b(?:the\s+)?(?:past|previous)\s+(day|week|month|year)\b"),
        ("last_unit", r"\blast\s+(week|month|year)\b"),
        ("this_unit", r"\bthis\s+(week|month|year)\b"),
        ("since_start", r"\bsince\s+the\s+(?:start|beginning)\s+of\s+(?:the|this)\s+(year|month)"),
        ("since_month", rf"\bsince\s+{_MONTH}(?:\s+(\d{{4}}))?"),
        ("weekday", rf"\b(?:last|on|this\s+past)\s+{_WEEKDAY}"),
        ("month", rf"\b(?:in|during|last)\s+{_MONTH}(?:\s+(\d{{4}}))?"),
        ("year", r"\b(?:in|during)\s+((?:19|20)\d\d)\b"),
        ("date_iso", r"\b((?:19|20)\d\d)[-/](\d{1,2})[-/](\d{1,2})\b"),
        ("date_md", rf"\bon\s+{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"),
        (
            "date_dm",
            rf"\bon\s+(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?",
        ),
        ("today", r"(?<!before )(?<!until )(?<!till )\btoday\b"),
    )
)


@dataclass(frozen=True)
class Period:
    """``[start, end)``: aware datetimes in the reference time's zone. ``text``: the words
    that named it (recall leaves them out of the search terms)."""

    start: datetime
    end: datetime
    text: str

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("a period's bounds are aware datetimes")
        if self.end <= self.start:
            raise ValueError("a period ends after it starts")

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def without(text: str, period: Period) -> str:
    """``text`` less the words that named ``period``, month and weekday names kept (people
    write those in what they say, not only in questions)."""
    kept = [
        w for w in period.text.split() if w.lower().strip(".") in _MONTHS or w.lower() in _WEEKDAYS
    ]
    return " ".join(text.replace(period.text, " ".join(kept) or " ", 1).split())


def _number(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS[text]


def _midnight(day: date, now: datetime) -> datetime:
    return datetime.combine(day, time(), tzinfo=now.tzinfo)


def _days(first: date, last: date, now: datetime, text: str) -> Period:
    """Whole days ``first`` to ``last`` inclusive, in ``now``'s zone."""
    return Period(_midnight(first, now), _midnight(last + timedelta(days=1), now), text)


def _month_span(year: int, month: int) -> tuple[date, date]:
    """First and last day of a month."""
    following = date(year + month // 12, month % 12 + 1, 1)
    return date(year, month, 1), following - timedelta(days=1)


def _months_back(day: date, months: int) -> date:
    """The same day ``months`` earlier, or the last day of a shorter month."""
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    last = _month_span(year, month + 1)[1]
    return last.replace(day=min(day.day, last.day))


def _latest_month(month: int, year: str | None, today: date) -> int:
    if year:
        return int(year)
    return today.year if month <= today.month else today.year - 1


def _ago(count: int, unit: str, today: date, now: datetime, text: str) -> Period | None:
    if count == 0:
        return _days(today, today, now, text)
    if unit == "month":
        center = _months_back(today, count)
    elif unit == "year":
        center = _months_back(today, 12 * count)
    else:
        center = today - timedelta(days=count * _UNIT_DAYS[unit])
    slack = max(1, round(count * _UNIT_DAYS[unit] * SLACK))
    return _days(center - timedelta(days=slack), center + timedelta(days=slack), now, text)


def _back_to(count: int, unit: str, today: date, now: datetime, text: str) -> Period:
    if unit == "month":
        first = _months_back(today, count)
    elif unit == "year":
        first = _months_back(today, 12 * count)
    else:
        first = today - timedelta(days=count * _UNIT_DAYS[unit])
    return _days(first, today, now, text)


def _calendar(unit: str, back: int, today: date, now: datetime, text: str) -> Period:
    """The calendar week, month or year ``back`` before the current one (0: this one)."""
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * back)
        return _days(monday, monday + timedelta(days=6), now, text)
    if unit == "month":
        first = _months_back(date(today.year, today.month, 1), back)
        return _days(*_month_span(first.year, first.month), now, text)
    return _days(date(today.year - back, 1, 1), date(today.year - back, 12, 31), now, text)


def _period(kind: str, match: re.Match[str], today: date, now: datetime) -> Period | None:
    text = match.group(0)
    if kind == "ago":
        return _ago(_number(match.group(1)), match.group(2).lower(), today, now, text)
    if kind == "day_before_yesterday":
        day = today - timedelta(days=2)
        return _days(day, day, now, text)
    if kind == "yesterday":
        day = today - timedelta(days=1)
        return _days(day, day, now, text)
    if kind == "today":
        return _days(today, today, now, text)
    if kind == "past_n":
        return _back_to(_number(match.group(1)), match.group(2).lower(), today, now, text)
    if kind == "past_one":
        return _back_to(1, match.group(1).lower(), today, now, text)
    if kind in ("last_unit", "this_unit"):
        return _calendar(match.group(1).lower(), int(kind == "last_unit"), today, now, text)
    if kind == "since_start":
        unit = match.group(1).lower()
        first = date(today.year, 1, 1) if unit == "year" else date(today.year, today.month, 1)
        return _days(first, today, now, text)
    if kind == "since_month":
        month = _MONTHS[match.group(1).lower()]
        year = _latest_month(month, match.group(2), today)
        first = date(year, month, 1)
        return _days(first, max(first, today), now, text)
    if kind == "weekday":
        back = (today.weekday() - _WEEKDAYS[match.group(1).lower()] - 1) % 7 + 1
        day = today - timedelta(days=back)
        return _days(day, day, now, text)
    if kind == "month":
        month = _MONTHS[match.group(1).lower()]
        # "may" is also a verb: only "in/during May" or "May 2023" count.
        if match.group(1).lower() == "may" and not (
            match.group(2) or text.lower().startswith(("in", "dur"))
        ):
            return None
        return _days(*_month_span(_latest_month(month, match.group(2), today), month), now, text)
    if kind == "year":
        year = int(match.group(1))
        return _days(date(year, 1, 1), date(year, 12, 31), now, text)
    if kind == "date_iso":
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        return _days(day, day, now, text)
    if kind in ("date_md", "date_dm"):
        month_at, day_at = (1, 2) if kind == "date_md" else (2, 1)
        month = _MONTHS[match.group(month_at).lower()]
        number = int(match.group(day_at))
        if match.group(3):
            day = date(int(match.group(3)), month, number)
        else:  # the latest such day not after today
            day = date(today.year, month, number)
            if day > today:
                day = date(today.year - 1, month, number)
        return _days(day, day, now, text)
    raise AssertionError(kind)


def find_period(text: str, now: datetime) -> Period | None:
    """The period ``text`` names, relative to ``now`` (an aware datetime), or None.

    Several expressions: the one that comes first in the text. Never raises on any text.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    today = now.date()
    found: list[tuple[int, int, str, re.Match[str]]] = []
    for order, (kind, pattern) in enumerate(_PATTERNS):
        m = pattern.search(text)
        if m is not None:
            found.append((m.start(), order, kind, m))
    for _, _, kind, m in sorted(found, key=lambda found_at: (found_at[0], found_at[1])):
        try:
            period = _period(kind, m, today, now)
        except (ValueError, OverflowError, KeyError):
            continue  # a date out of range ("in 1900" minus months), a stray match
        if period is not None:
            return period
    return None
