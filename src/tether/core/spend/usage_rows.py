"""``tether usage``: token counts and estimated cost per job kind, local day or session.

Pure: the caller reads the session logs' ``Usage`` records and the budget gate's ledger.
Turns (live, heartbeat, cron) are counted from their ``Usage`` records, the log being the
record of what the server did; calls that log no ``Usage`` (compaction and tool-output
summaries, and the sweep's and harvest's when they land) come from the ledger's settled
rows. The ledger's refusals of every kind are counted beside them. Extraction calls (the
harvest's, the sweep's model pass) are also in the call log (``CallRecord``): a failed
call is counted there (``failed``), and an ungated call (one the ledger never sees) adds
its call and tokens from there (a call that came back: a timed-out one has no tokens).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Literal

from tether.core.spend.budget_rules import Prices, local_day, usage_usd
from tether.core.timing.scheduling import HEARTBEAT_SESSION
from tether.records import SpendKind, SpendRow

By = Literal["kind", "day", "session"]
#: Kinds whose model calls are turns, so their spend is in the session logs.
TURN_KINDS: frozenset[SpendKind] = frozenset({"live", "heartbeat", "cron"})
#: ``core.timing.scheduling.job_session_id`` names every cron run's session so.
JOB_PREFIX = "job-"


def turn_kind(session: str) -> SpendKind:
    """Whose budget a turn of ``session`` spends (the scheduler's own session names)."""
    if session == HEARTBEAT_SESSION:
        return "heartbeat"
    if session.startswith(JOB_PREFIX):
        return "cron"
    return "live"


@dataclass(frozen=True)
class LoggedUsage:
    """One ``Usage`` record of a session log, with where it was logged."""

    session: str
    slot: int
    time: datetime
    cache_n: int
    prompt_n: int
    predicted_n: int


@dataclass(frozen=True)
class CallRecord:
    """One extraction model call of the call log: ok or failed (its reason code), its
    tokens, and whether the budget ledger records it too (``gated``)."""

    time: datetime
    kind: SpendKind
    session: str
    ok: bool
    reason: str | None
    gated: bool
    cache_n: int = 0
    prompt_n: int = 0
    predicted_n: int = 0


@dataclass
class Line:
    key: str
    calls: int = 0
    prompt_n: int = 0
    cache_n: int = 0
    predicted_n: int = 0
    usd: float = 0.0
    refused: int = 0
    #: Model calls that failed (timeout, malformed reply, context full, ...).
    failed: int = 0

    def add(self, cache_n: int, prompt_n: int, predicted_n: int, prices: Prices) -> None:
        self.calls += 1
        self.cache_n += cache_n
        self.prompt_n += prompt_n
        self.predicted_n += predicted_n
        self.usd += usage_usd(cache_n, prompt_n, predicted_n, prices)


@dataclass
class Report:
    by: By
    since: date | None
    lines: list[Line] = field(default_factory=list)
    total: Line = field(default_factory=lambda: Line("total"))
    #: cache_n / (cache_n + prompt_n) over the main slot's turns; None with no tokens.
    main_cache_hit_share: float | None = None


def _key(by: By, kind: str, day: date, session: str) -> str:
    if by == "kind":
        return kind
    if by == "day":
        return day.isoformat()
    return session


def report(
    logged: Iterable[LoggedUsage],
    ledger: Iterable[SpendRow],
    *,
    zone: tzinfo,
    prices: Prices,
    by: By,
    since: date | None,
    main_slot: int,
    calls: Iterable[CallRecord] = (),
) -> Report:
    lines: dict[str, Line] = {}
    out = Report(by=by, since=since)
    main_cached = main_prompt = 0

    def line(key: str) -> Line:
        if key not in lines:
            lines[key] = Line(key)
        return lines[key]

    for u in logged:
        day = local_day(zone, u.time)
        if since is not None and day < since:
            continue
        kind = turn_kind(u.session)
        line(_key(by, kind, day, u.session)).add(u.cache_n, u.prompt_n, u.predicted_n, prices)
        out.total.add(u.cache_n, u.prompt_n, u.predicted_n, prices)
        if u.slot == main_slot:
            main_cached += u.cache_n
            main_prompt += u.prompt_n
    for row in ledger:
        day = date.fromisoformat(row.day)
        if since is not None and day < since:
            continue
        target = line(_key(by, row.kind, day, row.session))
        if row.state == "refused":
            target.refused += 1
            out.total.refused += 1
        elif row.state == "settled" and row.kind not in TURN_KINDS:
            target.add(row.cache_n, row.prompt_n, row.predicted_n, prices)
            out.total.add(row.cache_n, row.prompt_n, row.predicted_n, prices)
    for c in calls:
        day = local_day(zone, c.time)
        if since is not None and day < since:
            continue
        target = line(_key(by, c.kind, day, c.session))
        if not c.ok:
            target.failed += 1
            out.total.failed += 1
        elif not c.gated:
            target.add(c.cache_n, c.prompt_n, c.predicted_n, prices)
            out.total.add(c.cache_n, c.prompt_n, c.predicted_n, prices)
    out.lines = [lines[k] for k in sorted(lines)]
    if main_cached + main_prompt:
        out.main_cache_hit_share = main_cached / (main_cached + main_prompt)
    return out
