"""Days whose model invocation stops an owner's sweep, and the safe way out of each
(``tether sweep status`` and ``tether sweep reconcile``).

A day after the owner's cursor is stuck when its model stage (``sweep.stage``; a home's
files, and a sweep worker's table when the store is PostgreSQL) says:

- ``invoked`` with a live lease: ``busy``, a run is calling the model for it now;
- ``invoked``, lease run out, holder still running on this machine: ``stalled``;
- ``invoked``, lease run out, holder gone (or on another machine): ``abandoned``; the
  next run takes it over by itself;
- ``failed``: the invocation ended without a usable page (its reason); never retried by
  itself;
- unreadable: ``malformed``.

``reconcile`` re-opens what is safe to re-open and nothing else: an ``abandoned`` mark or
a ``failed`` outcome is removed, compared and swapped on the exact record read (so it
cannot remove a mark a run took over meanwhile, nor race a late outcome: that write
finds its mark gone and is refused); the next run makes one new invocation. A ``busy``
or ``stalled`` day is left (its holder may still send a request), and so is a
``malformed`` one (it may be a newer tether's record: the runbook says how to look).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Literal

import msgspec

from tether.core.sweep.state import Cursor
from tether.ports import ModelStages
from tether.sweep import stage
from tether.sweep.holder import liveness

Why = Literal["busy", "stalled", "abandoned", "failed", "malformed"]
_VERDICT: dict[str, Why] = {"live": "busy", "stalled": "stalled", "expired": "abandoned"}


class StuckDay(msgspec.Struct, kw_only=True):
    local_date: str
    why: Why
    #: Where the record is: the home's stage files, or the store's table.
    where: str
    reason: str | None = None  # a failed invocation's reason code
    holder: str | None = None  # ``host:pid``
    holder_process: str | None = None  # ``alive``, ``gone``, ``elsewhere``, ...
    since: str | None = None
    lease_until: str | None = None
    #: Seconds of lease left (negative: run out that long ago), on the stages' clock.
    lease_left_s: float | None = None


class Reopened(msgspec.Struct, kw_only=True):
    local_date: str
    why: Why
    #: ``reopened`` (the next run makes one new invocation) or ``left`` (see ``why``).
    action: Literal["reopened", "left"]


def describe(row: StuckDay) -> str:
    """One line of ``tether sweep status`` for a stuck day."""
    day, why = row.local_date, row.why
    if why == "failed":
        return f"  stuck {day}: failed ({row.reason}); `tether sweep reconcile` re-opens it"
    if why == "malformed":
        return f"  stuck {day}: stage unreadable (runbook sweep-day-stuck)"
    left = row.lease_left_s
    lease = (
        "no lease"
        if left is None
        else (f"lease {left:g} s left" if left >= 0 else f"lease ran out {-left:g} s ago")
    )
    then = {
        "busy": "a run is calling the model for it",
        "stalled": "its holder still runs: stop it, or wait",
        "abandoned": "the next run takes it over",
    }[why]
    if why == "busy" and row.holder_process == "gone":
        then = "its holder is gone: the next run after the lease takes it over"
    return (
        f"  stuck {day}: {why}, held by {row.holder or 'an older tether'}"
        f" ({row.holder_process}) since {row.since or '-'}, {lease}; {then}"
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def days(
    stages: ModelStages, where: str, owner: str, cursor: Cursor | None
) -> list[tuple[StuckDay, bytes]]:
    """The owner's stuck days in ``stages`` (after the cursor), each with the record read
    (what ``reopen`` compares)."""
    out = []
    now = stages.now()
    for day in stages.days(owner):
        if cursor is not None and day <= cursor.local_date:
            continue
        try:
            got = stage.parse(stages.load(owner, day))
        except OSError:
            got = stage.Read("bad")
        s = got.stage
        if got.kind == "bad":
            out.append((StuckDay(local_date=day.isoformat(), why="malformed", where=where), b""))
            continue
        if s is None or s.state == "staged":
            continue  # absent, older (attested empty) or staged: the next run applies it
        if s.state == "failed":
            row = StuckDay(local_date=day.isoformat(), why="failed", where=where, reason=s.reason)
        else:
            until = s.lease_until
            row = StuckDay(
                local_date=day.isoformat(),
                why=_VERDICT[stage.held(stages, s)],
                where=where,
                holder=None if s.holder is None else str(s.holder),
                holder_process=liveness(s.holder),
                since=_iso(s.since),
                lease_until=_iso(until),
                lease_left_s=None if until is None else round((until - now).total_seconds(), 1),
            )
        out.append((row, got.raw))
    return out


def reopen(
    sources: Sequence[tuple[str, ModelStages]],
    owner: str,
    cursor: Cursor | None,
    only: date | None = None,
) -> list[Reopened]:
    """Re-open the owner's ``abandoned`` and ``failed`` days (``only``: that one);
    leave the rest, saying why (module docstring)."""
    done = []
    for where, stages in sources:
        for row, raw in days(stages, where, owner, cursor):
            day = date.fromisoformat(row.local_date)
            if only is not None and day != only:
                continue
            safe = row.why in ("abandoned", "failed")
            removed = safe and stages.remove(owner, day, raw)
            done.append(
                Reopened(
                    local_date=row.local_date,
                    why=row.why,
                    action="reopened" if removed else "left",
                )
            )
    return done
