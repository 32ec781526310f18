"""Ports: the Protocols adapters implement. Records crossing them are typed, never dicts.

The Store holds everything that is not a session log: the full-text index over logs,
notes, pages, the journal of memory writes, and the recalls log. SQLite
(``stores/sqlite.py``) is the embedded default; PostgreSQL will implement the same
contract and pass the same tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

import msgspec

HitKind = Literal["turn", "summary", "page", "fact", "note"]
Tag = Literal["memory", "memory-tainted"]
#: Which part of a session log an indexed row came from.
LogField = Literal["user", "assistant", "tool_call", "summary"]


class Hit(msgspec.Struct, frozen=True):
    """One recall result. ``session``/``turn`` are set for session-log hits."""

    kind: HitKind
    session: str | None
    turn: int | None
    text: str
    tag: Tag
    score: float
    #: Stable key of what was found (``note:12``, ``page:slug``, ``turn:s1:4``), used by
    #: the recalls log so counts survive a re-index.
    ref: str


class LogRow(msgspec.Struct, frozen=True):
    """A searchable piece of a session log, as the indexer hands it to the store."""

    session: str
    epoch: int
    turn: int
    field: LogField
    text: str
    tainted: bool
    time: datetime


class IndexCursor(msgspec.Struct, frozen=True):
    """How far a log file has been indexed: byte offset, the session's turn number and
    taint at that offset (so an incremental pass resumes with the right numbering)."""

    path: str
    offset: int
    turn: int
    tainted: bool
    #: Complete lines before ``offset``, so an error further on names the right line.
    lines: int = 0


class Note(msgspec.Struct, frozen=True):
    id: int
    text: str
    untrusted: bool
    session: str | None
    time: datetime


class Page(msgspec.Struct, frozen=True):
    slug: str
    title: str
    body: str
    tags: tuple[str, ...]
    visibility: Literal["private", "world"]
    untrusted: bool
    updated_at: datetime


class JournalEntry(msgspec.Struct, frozen=True):
    """One memory write: who did it, from which session, and the text before and after."""

    time: datetime
    who: str  # "owner", "agent", "import", ...
    session: str | None
    action: str  # "add", "remove", "consolidate", "note", "page_write", ...
    target: str  # "identity", "note:<id>", "page:<slug>"
    before: str | None
    after: str | None
    id: int = 0


class RecallStat(msgspec.Struct, frozen=True):
    ref: str
    count: int
    last: datetime | None


class Clock(Protocol):
    """Where the daemon gets the time; tests pass a fixed or stepping clock."""

    def now(self) -> datetime: ...


class Store(Protocol):
    """Everything durable that is not a session log."""

    def close(self) -> None: ...

    # -- the full-text index over session logs ----------------------------------------
    def index_cursor(self, path: str) -> IndexCursor | None: ...

    def index_cursors(self) -> dict[str, IndexCursor]:
        """Every cursor by path: one read for a whole incremental pass."""

    def index_log_rows(self, rows: Sequence[LogRow], cursor: IndexCursor) -> None:
        """Add ``rows`` and move the file's cursor, in one transaction."""

    def index_logs(self, batch: Sequence[tuple[Sequence[LogRow], IndexCursor]]) -> None:
        """Add the rows of several files and move their cursors, in one transaction
        (a home of thousands of sessions is indexed in a few commits, not thousands)."""

    def reset_index(self) -> None:
        """Drop every indexed row and cursor (a full re-index follows). Recalls survive."""

    def optimize_index(self) -> None:
        """Compact the index after a bulk load (a full re-index, a large import)."""

    # -- notes, pages ------------------------------------------------------------------
    def add_note(
        self, text: str, *, untrusted: bool, session: str | None, time: datetime
    ) -> Note: ...

    def notes(self) -> list[Note]: ...

    def put_page(self, page: Page) -> None: ...

    def get_page(self, slug: str) -> Page | None: ...

    def pages(self) -> list[Page]: ...

    # -- search ------------------------------------------------------------------------
    def search(self, match: str, k: int) -> list[Hit]:
        """Run an FTS match expression (built by ``core.query``; never raw user text),
        ranked by bm25, best first."""

    def newest(self, match: str, k: int, *, within: int | None = None) -> list[Hit]:
        """The ``k`` most recently indexed rows ``match`` finds, newest first, unscored
        (score 0), looking only among the last ``within`` indexed rows when given. No
        ranking work: what recall uses when every word of a query is very common."""

    def row_count(self) -> int:
        """Rows in the full-text index (log rows, notes, pages): what term weights need."""

    def count_matches(self, matches: Sequence[str], cap: int) -> list[int]:
        """How many rows each expression matches, counting no further than ``cap``
        (cheap: what recall uses to leave out terms too common to rank quickly)."""

    # -- journal and recalls -----------------------------------------------------------
    def journal_append(self, entry: JournalEntry) -> JournalEntry: ...

    def journal(self, limit: int | None = None) -> list[JournalEntry]: ...

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None: ...

    def recall_stats(self) -> dict[str, RecallStat]: ...
