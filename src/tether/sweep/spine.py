"""A day's rows and its spine, read from the store (never from session files).

The day's rows: the owner's sessions (a session with no owner in the store is the home
owner's) with owner or assistant rows, or an epoch summary, inside the exact half-open
UTC window; less the sessions the owner discarded and those still processing (a turn in
flight that began before the window ended: one begun after it leaves the day's part
finished). Only owner and assistant words are read: never tool results, tool summaries
(recall results come back as those), the memory block or anything the sweep wrote.

The spine, per row: the epoch summaries written in the window, and for the part no
compaction summarised (rows of epochs with no summary in the window) a session-day
digest, made once on the background slot and kept in the store under (session, window
id, hash of the text it read); a part shorter than ``DIGEST_MIN_CHARS`` goes in as is.
Cut at ``[sweep] spine_chars``.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from datetime import datetime

import msgspec

from tether.core.learning.extraction import render_turns
from tether.core.sweep.packet import KEY_PATTERN, MAX_SOURCES
from tether.core.sweep.windows import Window
from tether.ports import SweepDayStore
from tether.records import EpochSummary, LogRow, SessionMeta, SourceTurn
from tether.sweep.owners import DEFAULT_OWNER

DIGEST_PROMPT = (
    "Summarise this part of one of the owner's conversations in a few plain sentences: "
    "what was decided, facts the owner stated about themselves or their plans, "
    "preferences, open questions. Keep the session and turn numbers of anything "
    "important. No preamble."
)
#: The raw text one digest reads at most, and its reply bound.
DIGEST_INPUT_CHARS = 12_000
DIGEST_REPLY_TOKENS = 300
#: An unsummarised part this short goes into the spine as is (no digest call).
DIGEST_MIN_CHARS = 600

_KEY = re.compile(KEY_PATTERN)


class DayRow(msgspec.Struct, frozen=True, kw_only=True):
    """One session of the day: its folder, the summaries written in the window, and the
    part no summary covers (its rows, rendered, and that text's hash)."""

    session: str
    folder: str | None
    summaries: tuple[EpochSummary, ...]
    rows: tuple[LogRow, ...]
    raw: str
    content_hash: str
    digest: str | None = None  # the stored digest of ``raw``, when made

    @property
    def needs_digest(self) -> bool:
        return self.digest is None and len(self.raw) > DIGEST_MIN_CHARS


class Day(msgspec.Struct, frozen=True, kw_only=True):
    rows: tuple[DayRow, ...]
    #: Sessions left out, by reason: ``discarded``, ``processing``, ``not_a_key``,
    #: ``too_many_sessions``.
    excluded: dict[str, int]

    @property
    def sessions(self) -> tuple[str, ...]:
        return tuple(r.session for r in self.rows)


def source_turns(rows: tuple[LogRow, ...] | list[LogRow]) -> list[SourceTurn]:
    """Rows as turns a memory may cite. An assistant row read after untrusted content
    (tainted) is left out: injected text must not earn an agent conclusion."""
    return [
        SourceTurn(
            session=r.session,
            turn=r.turn,
            role="owner" if r.field == "user" else "assistant",
            text=r.text,
        )
        for r in rows
        if r.field == "user" or not r.tainted
    ]


def _owner_of(meta: SessionMeta | None) -> str:
    return DEFAULT_OWNER if meta is None or meta.owner is None else meta.owner


def read_day(store: SweepDayStore, owner: str, window: Window) -> Day:
    """The owner's sessions with rows in the window (a session whose only trace in the
    window is an epoch summary is not one: compaction follows a turn)."""
    rows: dict[str, list[LogRow]] = defaultdict(list)
    home = owner == DEFAULT_OWNER
    for r in store.day_rows(window.start_utc, window.end_utc, owner=owner, home=home):
        rows[r.session].append(r)
    metas = store.sessions_meta(list(rows))
    summaries: dict[str, list[EpochSummary]] = defaultdict(list)
    for s in store.epoch_summaries(window.start_utc, window.end_utc, sessions=list(rows)):
        summaries[s.session].append(s)
    excluded: Counter[str] = Counter()
    out: list[DayRow] = []
    for sid in sorted(rows):
        meta = metas.get(sid)
        if _owner_of(meta) != owner:
            continue
        if meta is not None and meta.discarded_at is not None:
            excluded["discarded"] += 1
            continue
        if meta is not None and _processing(meta.open_since, window):
            excluded["processing"] += 1
            continue
        if not _KEY.fullmatch(sid):
            excluded["not_a_key"] += 1
            continue
        if len(out) >= MAX_SOURCES:
            excluded["too_many_sessions"] += 1
            continue
        done = {s.epoch for s in summaries[sid]}
        rest = tuple(r for r in rows[sid] if r.epoch not in done)
        raw = render_turns(source_turns(rest), cap=DIGEST_INPUT_CHARS) if rest else ""
        out.append(
            DayRow(
                session=sid,
                folder=None if meta is None else meta.folder,
                summaries=tuple(summaries[sid]),
                rows=tuple(rows[sid]),
                raw=raw,
                content_hash=hashlib.sha256(raw.encode()).hexdigest(),
            )
        )
    return Day(rows=tuple(out), excluded=dict(excluded))


def _processing(open_since: datetime | None, window: Window) -> bool:
    return open_since is not None and open_since < window.end_utc


def with_digests(day: Day, store: SweepDayStore, window: Window) -> Day:
    """The day with every digest already stored filled in."""
    rows = []
    for r in day.rows:
        d = store.session_digest(r.session, window.window_id, r.content_hash) if r.raw else None
        rows.append(r if d is None else msgspec.structs.replace(r, digest=d.text))
    return msgspec.structs.replace(day, rows=tuple(rows))


def spine(day: Day, cap: int) -> str:
    """The spine text, cut at ``cap`` characters (at a line where it can)."""
    blocks: list[str] = []
    for r in day.rows:
        lines = [f"## session {r.session} ({'folder: ' + r.folder if r.folder else 'unfiled'})"]
        lines += [f"[summary of epoch {s.epoch}] {s.text.strip()}" for s in r.summaries]
        if r.digest is not None:
            lines.append(f"[digest of the rest of the day] {r.digest.strip()}")
        elif r.raw:
            lines.append(r.raw)
        blocks.append("\n".join(lines))
    text = "\n\n".join(blocks)
    if len(text) <= cap:
        return text
    cut = text.rfind("\n", 0, cap)
    return text[: cut if cut > cap // 2 else cap]
