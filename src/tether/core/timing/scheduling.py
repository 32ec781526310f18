"""Scheduled work, pure: background priorities, job names and session ids, the time line,
the run ledger's records, and which tool results still want a summary.

Nothing here does I/O or reads the clock; ``tether.scheduler`` does both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import IntEnum
from typing import Annotated, Literal

import msgspec

from tether.errors import BadInputError
from tether.records import LogRecord, ToolCall, ToolResult, ToolSummary

#: The standing heartbeat session.
HEARTBEAT_SESSION = "heartbeat"
#: The cron job whose user text also carries the memory listing (``memory tiers``).
TIER_JOB = "tier"
#: ``job-<name>-t<unix-seconds>`` must fit a 64-character session id; 10 digits of
#: seconds last until the year 2286.
JOB_NAME_MAX = 64 - len("job--t") - 10
JOB_NAME_GRAMMAR = f"1 to {JOB_NAME_MAX} characters of a-z, 0-9 and '-'"
_JOB_NAME = re.compile(rf"[a-z0-9-]{{1,{JOB_NAME_MAX}}}")
#: Tool results never summarised: a refusal or an error says nothing worth indexing.
UNSUMMARISED_CLASSES = frozenset({"broker", "egress", "error"})


class Priority(IntEnum):
    """Who goes first when several wait for one slot (lower first; FIFO within a level).

    The background slot's order is the issue's: a compaction summary, then a due cron
    run, then heartbeat, then a tool-output summary. ``LIVE`` is a person waiting on a
    turn (the main slot, or an owner continuing a job session by hand) and beats all.
    """

    LIVE = 0
    COMPACTION = 1
    CRON = 2
    HEARTBEAT = 3
    TOOL_SUMMARY = 4
    #: The daily sweep's model pass: below every other kind of background work.
    SWEEP = 5


class InvalidJobNameError(BadInputError):
    def __init__(self, name: str) -> None:
        super().__init__(f"invalid job name {name!r}: expected {JOB_NAME_GRAMMAR}")
        self.name = name


def check_job_name(name: str) -> str:
    if not _JOB_NAME.fullmatch(name):
        raise InvalidJobNameError(name)
    return name


def job_session_id(name: str, minute: datetime) -> str:
    """The session of one run: ``job-<name>-t<unix seconds of its due minute>``."""
    return f"job-{check_job_name(name)}-t{int(minute.timestamp())}"


_JOB_SESSION = re.compile(rf"job-([a-z0-9-]{{1,{JOB_NAME_MAX}}})-t[0-9]+")


def job_of_session(sid: str) -> str | None:
    """The cron job whose run ``sid`` is (``job-<name>-t<seconds>``), or None."""
    m = _JOB_SESSION.fullmatch(sid)
    return m.group(1) if m else None


def time_line(now: datetime) -> str:
    """The volatile first line of a scheduled turn: ``It is <UTC time>.``"""
    t = now.astimezone(UTC)
    return f"It is {t:%A %Y-%m-%d %H:%M} UTC."


def scheduled_text(now: datetime, prompt: str, listing: str | None = None) -> str:
    """Time line, the prompt, then (for the tiering job) the memory listing."""
    text = f"{time_line(now)}\n{prompt.strip()}".rstrip()
    if listing:
        text += "\n\n" + listing.rstrip()
    return text


# -- the run ledger ------------------------------------------------------------------------

RunStatus = Literal["started", "finished", "failed", "skipped"]


class RunRecord(
    msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, omit_defaults=True
):
    """One line of ``jobs/runs.jsonl``. ``reason`` only on a ``skipped`` run: the budget
    gate's reason code (``budget_call``, ``budget_daily``, ``budget_usd``)."""

    time: Annotated[datetime, msgspec.Meta(tz=True)]
    name: str
    session: str
    status: RunStatus
    reason: str | None = None


def open_runs(records: Iterable[RunRecord]) -> list[RunRecord]:
    """``started`` records with no later end (``finished``, ``failed``, ``skipped``) of
    the same session, in ledger order."""
    open_: dict[str, RunRecord] = {}
    for r in records:
        if r.status == "started":
            open_[r.session] = r
        else:
            open_.pop(r.session, None)
    return list(open_.values())


def last_started(records: Iterable[RunRecord]) -> dict[str, datetime]:
    """Per job name, the time of its newest ``started`` record."""
    out: dict[str, datetime] = {}
    for r in records:
        if r.status == "started":
            out[r.name] = r.time
    return out


def last_records(records: Iterable[RunRecord]) -> dict[str, RunRecord]:
    """Per job name, its newest record (``jobs list``'s last run)."""
    out: dict[str, RunRecord] = {}
    for r in records:
        out[r.name] = r
    return out


def retained_runs(records: Sequence[RunRecord], keep: int) -> list[RunRecord]:
    """The ledger pruned to its newest ``keep`` runs (a run: every record of one session,
    kept or dropped whole, so a kept ``started`` never loses its end), in ledger order.

    Kept whatever their age, because the scheduler reads them: every run still open (a
    dead daemon's, closed as ``failed`` at the next start), each job's newest ``started``
    (a daemon restarted inside that minute must not run it again) and each job's newest
    record (its last run, in ``jobs list``). So ``open_runs``, ``last_started`` and
    ``last_records`` read the same before and after.
    """
    last_at: dict[str, int] = {}
    for i, r in enumerate(records):
        last_at[r.session] = i
    by_age = sorted(last_at, key=last_at.__getitem__)
    kept = set(by_age[max(0, len(by_age) - keep) :])
    kept.update(r.session for r in open_runs(records))
    kept.update(r.session for r in last_records(records).values())
    started: dict[str, str] = {}
    for r in records:
        if r.status == "started":
            started[r.name] = r.session
    kept.update(started.values())
    return [r for r in records if r.session in kept]


# -- tool-output summaries -----------------------------------------------------------------


def pending_summaries(
    records: Sequence[LogRecord], tools: Iterable[str]
) -> list[tuple[ToolCall, ToolResult]]:
    """Results of opted-in tools that have no ToolSummary yet, in log order (with the
    call that produced each). Refusals and errors are skipped."""
    wanted = frozenset(tools)
    calls: dict[str, ToolCall] = {}
    summarised: set[str] = set()
    results: list[ToolResult] = []
    for r in records:
        if isinstance(r, ToolCall):
            calls[r.id] = r
        elif isinstance(r, ToolResult):
            results.append(r)
        elif isinstance(r, ToolSummary):
            summarised.add(r.tool_call_id)
    out = []
    for result in results:
        call = calls.get(result.tool_call_id)
        if (
            call is not None
            and call.name in wanted
            and result.tool_call_id not in summarised
            and result.class_ not in UNSUMMARISED_CLASSES
        ):
            out.append((call, result))
    return out
