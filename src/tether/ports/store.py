"""The ``Store`` port: everything durable that is not a session log (the full-text index
over logs, notes, pages, the journal of memory writes, the recalls log, the spend ledger,
what the sweep reads of a day). SQLite (``stores/sqlite.py``) is the embedded default;
PostgreSQL (``stores/postgres.py``) implements the same contract and passes the same tests.

It is cut into role ports, one per thing its consumers do with it, and each consumer is
typed on the roles it uses: the indexer on ``LogIndex``, recall on ``RecallStore``, the
budget gate on ``SpendLedger``, the sweep's model pass on ``SweepDayStore``, and so on.
``Store`` is their union, what the composition root (``daemon``, the CLI, the memory
browser) opens and hands down; ``tests/test_house.py`` keeps every other part off it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from tether.core.context.memory_block import Entry
from tether.core.recall.summaries import Unit
from tether.core.sweep import state as _sweep
from tether.records import (
    BudgetReason,
    EpochSummary,
    Found,
    Hit,
    IndexCursor,
    JournalEntry,
    LogRow,
    Note,
    Page,
    RecallStat,
    SearchQuery,
    SessionDigest,
    SessionMeta,
    SessionState,
    SpendRow,
    SpendSettle,
    SpentToday,
    TextCell,
)

# -- the roles -------------------------------------------------------------------------


class TurnReader(Protocol):
    """A session's turns by number, as indexed: what the sweep reads of a day's sessions,
    what a summary unit is rebuilt from and reports it covers."""

    def session_turns(self, session: str, first: int, last: int) -> list[LogRow]:
        """Owner and assistant log rows of turns ``first..last`` of one session."""


class LogIndex(Protocol):
    """The full-text index over session logs as the indexer writes it: rows and the
    cursor of each log file, what an indexing pass learnt of sessions, compaction summaries.
    (``memory.indexer``.)"""

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

    def forget_session_index(self, session: str) -> int:
        """Drop one session's log rows, summary units and cursors, in one transaction
        (its logs were rewritten: the pass reads them again from the start); how many
        rows. Recalls survive."""

    def optimize_index(self) -> None:
        """Compact the index after a bulk load (a full re-index, a large import)."""

    def track_sessions(self, states: Sequence[SessionState]) -> None:
        """What an indexing pass learnt: new sessions (the runtime's onboarding mark on
        an owner's first few that are not imports), open turns."""

    def put_epoch_summaries(self, summaries: Sequence[EpochSummary]) -> None:
        """Insert or replace compaction summaries by (session, epoch)."""

    def put_summary_units(self, units: Sequence[Unit], gone: Sequence[str] = ()) -> None:
        """Index summary units (``core.recall.summaries``) as rows of kind ``summary`` with their
        ref, in one transaction: the rows of the refs in ``gone`` and of the units' own
        refs go first, so putting the same units again changes nothing."""


class TextSearch(Protocol):
    """Search over the index: a ``SearchQuery`` (built by ``core.recall.query``), each store
    renders it. (``memory.recall``.)"""

    def search(self, query: SearchQuery, limit: int) -> list[Hit]:
        """The rows ``query`` finds, ranked by relevance over the whole query (bm25; term
        weights are not used), best first; a query with no terms finds nothing."""

    def search_terms(
        self, query: SearchQuery, limit: int, *, aside: float, only: Sequence[str] | None = None
    ) -> list[Found]:
        """The ``limit`` best rows ``query`` finds, scored by the sum over its terms of
        weight x bm25, where a term's matches in assistant replies, tool calls and tool
        summaries count ``aside`` of those in the owner's text, notes and pages. Best
        first. ``only``: search just the rows with these refs (``page:<slug>``,
        ``fact:<id>``: what a remote MCP client may see); empty finds nothing."""

    def newest(
        self,
        query: SearchQuery,
        limit: int,
        *,
        within: int | None = None,
        only: Sequence[str] | None = None,
    ) -> list[Found]:
        """The ``limit`` most recently indexed rows ``query`` finds, newest first, unscored
        (score 0), looking only among the last ``within`` indexed rows when given (and
        only among the rows of the refs ``only``, when given). No ranking work: what
        recall uses when every word of a query is very common."""

    def between(self, start: datetime, end: datetime, limit: int) -> list[Found]:
        """The first ``limit`` session-log rows (the owner's words and the replies) written in
        ``[start, end)``, oldest first, unscored (score 0): what recall answers "what did
        we talk about on May 30" with, when no word of the question finds it."""

    def row_count(self) -> int:
        """Rows in the full-text index (log rows, notes, pages): what term weights need."""

    def count_matches(self, queries: Sequence[SearchQuery], cap: int) -> list[int]:
        """How many rows each query matches, counting no further than ``cap``
        (cheap: what recall uses to leave out terms too common to rank quickly)."""


class RecallLog(Protocol):
    """Which rows recall returned, and when (the tiers read it back)."""

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None: ...

    def recall_stats(self) -> dict[str, RecallStat]: ...


class MemoryJournal(Protocol):
    """The journal of memory writes: every edit of identity, notes and pages, the
    imports, the memory scan's redactions."""

    def journal_append(self, entry: JournalEntry) -> JournalEntry: ...

    def journal(self, limit: int | None = None) -> list[JournalEntry]: ...


class NoteStore(Protocol):
    """Notes, each one a row of the index."""

    def add_note(
        self, text: str, *, untrusted: bool, session: str | None, time: datetime
    ) -> Note: ...

    def notes(self) -> list[Note]: ...


class PageStore(Protocol):
    """Pages, each one a row of the index."""

    def put_page(self, page: Page) -> None: ...

    def get_page(self, slug: str) -> Page | None: ...

    def pages(self) -> list[Page]: ...

    def delete_page(self, slug: str) -> Page | None:
        """Remove a page and its index row; the page as it was, or None if none."""


class IdentityIndex(Protocol):
    """memory.md's entries mirrored into the index, with the stamp they were read at."""

    def identity_stamp(self) -> str | None:
        """The stamp (memory.md's sha256) given with the identity rows indexed now."""

    def replace_identity(self, entries: Sequence[Entry], *, stamp: str, time: datetime) -> None:
        """Replace every identity row with ``entries`` and store ``stamp``, atomically."""


class FactIndex(Protocol):
    """The sweep's active facts mirrored into the index, with the stamp they were read at
    (``memory.facts``)."""

    def facts_stamp(self) -> str | None:
        """The stamp (``SweepTx.facts_stamp``) given with the fact rows indexed now."""

    def replace_facts(
        self, facts: Sequence[_sweep.Fact], *, stamp: str, expect: str | None
    ) -> bool:
        """Replace every fact row with ``facts`` (``fact:<id>``, as given: the caller
        redacts) and store ``stamp``, atomically, if the stored stamp is still
        ``expect``; False (nothing written) when another writer synced meanwhile."""


class StoredCells(Protocol):
    """The stored text of memory, for the secret scan (``memory.secret_scan``)."""

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        """Call ``visit`` with every non-empty stored memory text (notes, pages and their
        index rows, the journal), in batches. The sweep's are ``SweepStore.read_cells``."""

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """Replace the cells that still hold the text they were read with, in one
        transaction, zeroing what is freed; then truncate the write-ahead log. Per edit,
        whether it was made; and whether the log was truncated (a reader may keep it)."""


class SpendLedger(Protocol):
    """The budget gate's spend ledger (``agent.budget``; ``tether usage`` reads it)."""

    def budget_reserve(
        self,
        row: SpendRow,
        decide: Callable[[SpentToday], BudgetReason | None],
        settles: Sequence[SpendSettle] = (),
    ) -> SpendRow:
        """In one write transaction: apply ``settles`` (earlier calls' usage, as
        ``budget_settle`` would), read what ``row.day`` has spent (``row.kind``'s
        tokens, all background work's money), call ``decide`` with it, and store ``row``
        as ``reserved`` (its bound added to the day) or ``refused`` with the reason. The
        stored row comes back, with its id. Two reservations never see the same totals."""

    def budget_settle_all(self, settles: Sequence[SpendSettle]) -> None:
        """``budget_settle`` of each of ``settles``, in one write transaction."""

    def budget_settle(
        self,
        spend_id: int,
        *,
        tokens: int,
        usd: float,
        cache_n: int = 0,
        prompt_n: int = 0,
        predicted_n: int = 0,
    ) -> bool:
        """Replace a reservation's bound by what its call used (0 for a call that
        failed); False if it was not an open reservation."""

    def budget_spent(self, day: str, kind: str) -> SpentToday:
        """What ``day`` has spent, as ``budget_reserve`` would weigh it."""

    def budget_rows(self, since: str | None = None) -> list[SpendRow]:
        """Every ledger row of local days from ``since`` (YYYY-MM-DD) on, oldest first."""


class SessionMetas(Protocol):
    """What the store knows of each session: owner, discard mark, folder, onboarding."""

    def session_meta(self, session: str) -> SessionMeta | None: ...

    def sessions_meta(self, sessions: Sequence[str] | None = None) -> dict[str, SessionMeta]:
        """The sessions the store knows of (those of ``sessions`` when given), by id."""

    def put_session_meta(self, meta: SessionMeta) -> None:
        """Insert or replace a session's metadata (owner, discard, folder...)."""


class DayLog(Protocol):
    """What the sweep reads of a day, so that a sweep worker needs only the store: the
    day's rows, a session's turns, compaction summaries, session-day digests."""

    def day_rows(
        self, start: datetime, end: datetime, *, owner: str, home: bool = False
    ) -> list[LogRow]:
        """Owner and assistant log rows in ``[start, end)`` of ``owner``'s sessions
        (``home``: and of every session with no owner), by session and turn."""

    def epoch_summaries(
        self, start: datetime, end: datetime, *, sessions: Sequence[str] | None = None
    ) -> list[EpochSummary]:
        """Epoch summaries written in ``[start, end)`` (of ``sessions`` when given)."""

    def session_digest(
        self, session: str, window_id: str, content_hash: str
    ) -> SessionDigest | None: ...

    def put_session_digest(self, digest: SessionDigest) -> None:
        """Store a session-day digest; one already stored under its key is kept."""


# -- what each consumer uses: the roles it needs together -------------------------------
# Each lists its roles flat and in the order they are defined above: protocols match by
# structure, so a MemoryStore is a RecallStore to mypy without naming it, and one order
# keeps Python's method resolution order consistent for every union.


class NoteWriter(MemoryJournal, NoteStore, Protocol):
    """Notes written and journalled (``memory.notes``)."""


class PageWriter(MemoryJournal, PageStore, Protocol):
    """Pages written, removed and journalled (``memory.pages``)."""


class IdentityStore(MemoryJournal, IdentityIndex, Protocol):
    """memory.md's mirror and the journal of its edits (``memory.identity``)."""


class ScanStore(MemoryJournal, StoredCells, Protocol):
    """The memory scan's reads and rewrites, and its journal line (``memory.secret_scan``)."""


class IndexStore(TurnReader, LogIndex, Protocol):
    """An index pass: the logs' new rows and their summary units (``memory.indexer``)."""


class RecallStore(
    TurnReader, TextSearch, RecallLog, MemoryJournal, IdentityIndex, FactIndex, Protocol
):
    """Recall: the search, the recalls log, and the mirrors it brings up to date first
    (identity, the sweep's facts) (``memory.recall``)."""


class TierStore(RecallLog, MemoryJournal, NoteStore, IdentityIndex, Protocol):
    """The tiering listing: identity, notes, and how often each was recalled
    (``memory.tiers``)."""


class MemoryStore(
    TurnReader,
    LogIndex,
    TextSearch,
    RecallLog,
    MemoryJournal,
    NoteStore,
    PageStore,
    IdentityIndex,
    FactIndex,
    Protocol,
):
    """The memory a turn, a tool call or an MCP client works on: recall over the index,
    the index kept up to date, notes, pages, identity and their journal (``agent``,
    ``tools``, ``mcp``)."""


class ImportStore(TurnReader, LogIndex, MemoryJournal, SessionMetas, Protocol):
    """An import: journalled once, sessions' owners set, the home indexed (``imports``)."""


class SweepDayStore(TurnReader, SessionMetas, DayLog, Protocol):
    """What the sweep's model pass and onboarding read and write of a day (``sweep``)."""


class Store(
    TurnReader,
    LogIndex,
    TextSearch,
    RecallLog,
    MemoryJournal,
    NoteStore,
    PageStore,
    IdentityIndex,
    FactIndex,
    StoredCells,
    SpendLedger,
    SessionMetas,
    DayLog,
    Protocol,
):
    """Everything durable that is not a session log: the union of the roles, opened and
    closed by the composition root."""

    def close(self) -> None: ...


#: How a use-case gets a store it may not need: it calls this only when it has something
#: to write, so a bad input file leaves no ``tether.db`` behind; the caller (the CLI, a
#: test) decides which store and keeps owning it (``contextlib.nullcontext(store)`` hands
#: over one already open).
StoreOpener = Callable[[], AbstractContextManager[ImportStore]]
