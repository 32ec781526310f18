"""Ports: every Protocol an adapter implements, in one place. Records crossing them are
typed, never dicts, and live in ``tether.records`` (memory, inference) or ``tether.core``
(the sweep's state and packets): this module imports vocabulary only.

- ``Clock``: where the time comes from (tests pass a stepping clock).
- ``Store``: everything durable that is not a session log (below).
- ``SweepStore`` / ``SweepTx``: the daily sweep's owners, cursors, receipts, facts and
  journal, read and written only inside its transactions; what the main store's fact
  mirror and the memory scan need of it goes through methods here too.
- ``Llm``: an inference backend (llama-server, the embedded model).
- ``Producer``: what gives the sweep a day's packet.
- ``ModelStages``: the model pass's at-most-once record of each owner-day's invocation
  (the home's stage files, or a table in the store for a sweep worker).
- ``Embedder`` / ``VectorIndex``: sentence vectors for recall (the extra tether[vectors]):
  the model that makes them, and where they are kept and searched.

The Store holds everything that is not a session log: the full-text index over logs,
notes, pages, the journal of memory writes, and the recalls log. SQLite
(``stores/sqlite.py``) is the embedded default; PostgreSQL (``stores/postgres.py``)
implements the same contract and passes the same tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from tether.core.memory_block import Entry
from tether.core.summaries import Unit
from tether.core.sweep import state as _sweep
from tether.core.sweep.packet import DailySweepInput, Incomplete
from tether.core.sweep.windows import Window
from tether.records import (
    BudgetReason,
    ClaimedDay,
    Completion,
    CompletionRequest,
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
    VecSource,
    VectorCounts,
)

if TYPE_CHECKING:  # numpy comes with the extra tether[vectors]; only its types are named here
    import numpy as np
    import numpy.typing as npt

    #: Rows of L2-normalised float32 vectors, one per text.
    Matrix = npt.NDArray[np.float32]

#: How a use-case gets a store it may not need: it calls this only when it has something
#: to write, so a bad input file leaves no ``tether.db`` behind; the caller (the CLI, a
#: test) decides which store and keeps owning it (``contextlib.nullcontext(store)`` hands
#: over one already open).
StoreOpener = Callable[[], AbstractContextManager["Store"]]


class Progress(Protocol):
    """Where a long job (an import, a reindex, a memory scan) says how far it got: the CLI
    draws a bar on a terminal and says nothing when piped. A job calls ``stage`` when it
    starts a part (``total`` None: not known ahead), then ``advance`` as items are done."""

    def stage(self, what: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


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

    def delete_page(self, slug: str) -> Page | None:
        """Remove a page and its index row; the page as it was, or None if none."""

    # -- the stored text of memory, for the secret scan ---------------------------------
    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        """Call ``visit`` with every non-empty stored memory text (notes, pages and their
        index rows, the journal), in batches. The sweep's are ``SweepStore.read_cells``."""

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """Replace the cells that still hold the text they were read with, in one
        transaction, zeroing what is freed; then truncate the write-ahead log. Per edit,
        whether it was made; and whether the log was truncated (a reader may keep it)."""

    # -- identity entries and sweep facts, mirrored into the index ----------------------
    def identity_stamp(self) -> str | None:
        """The stamp (memory.md's sha256) given with the identity rows indexed now."""

    def replace_identity(self, entries: Sequence[Entry], *, stamp: str, time: datetime) -> None:
        """Replace every identity row with ``entries`` and store ``stamp``, atomically."""

    def facts_stamp(self) -> str | None:
        """The stamp (``SweepTx.facts_stamp``) given with the fact rows indexed now."""

    def replace_facts(
        self, facts: Sequence[_sweep.Fact], *, stamp: str, expect: str | None
    ) -> bool:
        """Replace every fact row with ``facts`` (``fact:<id>``, as given: the caller
        redacts) and store ``stamp``, atomically, if the stored stamp is still
        ``expect``; False (nothing written) when another writer synced meanwhile."""

    # -- the budget gate's spend ledger -------------------------------------------------
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

    # -- search: a ``SearchQuery`` (built by ``core.query``), each store renders it -------
    def search(self, query: SearchQuery, k: int) -> list[Hit]:
        """The rows ``query`` finds, ranked by relevance over the whole query (bm25; term
        weights are not used), best first; a query with no terms finds nothing."""

    def search_terms(
        self, query: SearchQuery, k: int, *, aside: float, only: Sequence[str] | None = None
    ) -> list[Found]:
        """The ``k`` best rows ``query`` finds, scored by the sum over its terms of
        weight x bm25, where a term's matches in assistant replies, tool calls and tool
        summaries count ``aside`` of those in the owner's text, notes and pages. Best
        first. ``only``: search just the rows with these refs (``page:<slug>``,
        ``fact:<id>``: what a remote MCP client may see); empty finds nothing."""

    def newest(
        self,
        query: SearchQuery,
        k: int,
        *,
        within: int | None = None,
        only: Sequence[str] | None = None,
    ) -> list[Found]:
        """The ``k`` most recently indexed rows ``query`` finds, newest first, unscored
        (score 0), looking only among the last ``within`` indexed rows when given (and
        only among the rows of the refs ``only``, when given). No ranking work: what
        recall uses when every word of a query is very common."""

    def between(self, start: datetime, end: datetime, k: int) -> list[Found]:
        """The first ``k`` session-log rows (the owner's words and the replies) written in
        ``[start, end)``, oldest first, unscored (score 0): what recall answers "what did
        we talk about on May 30" with, when no word of the question finds it."""

    def row_count(self) -> int:
        """Rows in the full-text index (log rows, notes, pages): what term weights need."""

    def count_matches(self, queries: Sequence[SearchQuery], cap: int) -> list[int]:
        """How many rows each query matches, counting no further than ``cap``
        (cheap: what recall uses to leave out terms too common to rank quickly)."""

    # -- journal and recalls -----------------------------------------------------------
    def journal_append(self, entry: JournalEntry) -> JournalEntry: ...

    def journal(self, limit: int | None = None) -> list[JournalEntry]: ...

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None: ...

    def recall_stats(self) -> dict[str, RecallStat]: ...

    # -- what the sweep reads of a day (so a sweep worker needs only the store) ----------
    def session_meta(self, session: str) -> SessionMeta | None: ...

    def sessions_meta(self, sessions: Sequence[str] | None = None) -> dict[str, SessionMeta]:
        """The sessions the store knows of (those of ``sessions`` when given), by id."""

    def put_session_meta(self, meta: SessionMeta) -> None:
        """Insert or replace a session's metadata (owner, discard, folder...)."""

    def track_sessions(self, states: Sequence[SessionState]) -> None:
        """What an indexing pass learnt: new sessions (the runtime's onboarding mark on
        an owner's first few that are not imports), open turns."""

    def day_rows(
        self, start: datetime, end: datetime, *, owner: str, home: bool = False
    ) -> list[LogRow]:
        """Owner and assistant log rows in ``[start, end)`` of ``owner``'s sessions
        (``home``: and of every session with no owner), by session and turn."""

    def session_turns(self, session: str, first: int, last: int) -> list[LogRow]:
        """Owner and assistant log rows of turns ``first..last`` of one session."""

    def put_epoch_summaries(self, summaries: Sequence[EpochSummary]) -> None:
        """Insert or replace compaction summaries by (session, epoch)."""

    def put_summary_units(self, units: Sequence[Unit], gone: Sequence[str] = ()) -> None:
        """Index summary units (``core.summaries``) as rows of kind ``summary`` with their
        ref, in one transaction: the rows of the refs in ``gone`` and of the units' own
        refs go first, so putting the same units again changes nothing."""

    def epoch_summaries(
        self, start: datetime, end: datetime, *, sessions: Sequence[str] | None = None
    ) -> list[EpochSummary]:
        """Epoch summaries written in ``[start, end)`` (of ``sessions`` when given)."""

    def session_digest(
        self, session: str, window_id: str, content_hash: str
    ) -> SessionDigest | None: ...

    def put_session_digest(self, digest: SessionDigest) -> None:
        """Store a session-day digest; one already stored under its key is kept."""


# -- the daily memory sweep ------------------------------------------------------------
# Rows are the Structs of ``tether.core.sweep.state``. The port is deliberately dumb: row
# reads and writes inside one transaction; the rules (fencing, claims, authority) live in
# ``tether.sweep`` once, so SQLite and PostgreSQL pass the same contract tests.


class SweepTx(Protocol):
    """One serialisable transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL rows ``FOR
    UPDATE``). Everything read inside it stays true until it commits."""

    def owner(self, owner_id: str) -> _sweep.Owner | None: ...

    def owners(self) -> list[_sweep.Owner]: ...

    def put_owner(self, owner: _sweep.Owner) -> None:
        """Insert or replace the owner row."""

    def wipe_owner(self, owner_id: str) -> int:
        """Delete the owner's facts, triggers, journal, receipts, cursor and stages (the
        owner row and its deletion marker stay). Returns the rows deleted."""

    def fact_in_slot(self, owner_id: str, subject: str, entity: str) -> _sweep.Fact | None:
        """The active fact of a slot, if any."""

    def put_fact(self, fact: _sweep.Fact) -> _sweep.Fact:
        """Insert (``id == 0``) or update a fact; returns it with its id."""

    def facts(self, owner_id: str) -> list[_sweep.Fact]: ...

    def trigger(self, owner_id: str, trigger_id: str) -> _sweep.StandingTrigger | None: ...

    def put_trigger(self, trigger: _sweep.StandingTrigger) -> None: ...

    def triggers(self, owner_id: str) -> list[_sweep.StandingTrigger]: ...

    def journal_for(self, receipt_id: str) -> _sweep.JournalRow | None: ...

    def append_journal(self, row: _sweep.JournalRow) -> _sweep.JournalRow: ...

    def journal(self, owner_id: str) -> list[_sweep.JournalRow]: ...

    def receipt(self, receipt_id: str) -> _sweep.Receipt | None: ...

    def put_receipt(self, receipt: _sweep.Receipt) -> None:
        """Insert or replace a receipt by id."""

    def receipts(self, owner_id: str) -> list[_sweep.Receipt]: ...

    def pending_receipts(
        self, owner_id: str, namespace: int, local_date: date, account_gen: int, source_gen: int
    ) -> int:
        """Receipts of one day (namespace, generations) not yet committed."""

    def cursor(self, owner_id: str) -> _sweep.Cursor | None: ...

    def put_cursor(self, cursor: _sweep.Cursor) -> None: ...

    def stage(
        self, owner_id: str, local_date: date, source_gen: int, window_id: str
    ) -> _sweep.StagedPacket | None: ...

    def put_stage(self, staged: _sweep.StagedPacket) -> None:
        """Insert a stage; an existing one for the same key is never replaced."""

    # -- what the main store's fact mirror reads ----------------------------------------
    def facts_stamp(self) -> str:
        """A stamp that changes with every write to facts or owners (``NO_SWEEP`` while
        the sweep has no tables here): the mirror re-reads the facts only when it moves."""

    def active_facts(self) -> list[_sweep.Fact]:
        """Every active fact of every owner not deleted, by id."""


class SweepStore(Protocol):
    """The sweep's durable state: owners, facts, standing triggers, journal, receipts,
    cursors, staged packets."""

    def close(self) -> None: ...

    def transaction(self, *, write: bool = True) -> AbstractContextManager[SweepTx]:
        """A transaction: committed when the block ends, rolled back if it raises."""

    def journal_rows(self, limit: int | None = None) -> list[_sweep.JournalRow]:
        """Every owner's canonical writes, oldest first; with ``limit``, only the newest
        ``limit``; none in a store the sweep never ran in (``tether memory journal``)."""

    # -- the stored text of the sweep, for the secret scan ------------------------------
    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        """Call ``visit`` with every non-empty sweep text (facts, the sweep journal,
        trigger conditions, staged packets), in batches; a stage whose day the sweep is
        in the middle of comes ``busy``."""

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """Replace the cells that still hold the text they were read with (a stage only
        while its day is still not in progress; its digest follows), in one sweep write
        transaction, zeroing what is freed; then truncate the write-ahead log. Per edit,
        whether it was made; and whether the log was truncated."""


class OwnerClaims(Protocol):
    """Owner-days that sweep workers share out (PostgreSQL: ``FOR UPDATE SKIP LOCKED``
    and a lease on the server's clock)."""

    def offer(self, days: Sequence[tuple[str, date]]) -> int:
        """Make these (owner, local date) pairs claimable, each once however often it is
        offered; how many were new."""

    def claim(self, claimant: str, lease: timedelta) -> ClaimedDay | None:
        """The oldest open owner-day (or one whose lease ran out), held by ``claimant``
        for ``lease``; None when there is none. Never waits on another worker's claim."""

    def finish(self, day: ClaimedDay, outcome: str) -> bool:
        """Mark the day done (``outcome`` ``complete``) or hand it back to be offered
        again (any other), if ``day.claimant`` still holds it (False: its lease ran out
        and another worker took it over)."""

    def release(self, claimant: str) -> int:
        """Hand back every owner-day ``claimant`` holds (claimable by any worker at once)
        and expire its pending receipts' leases; how many days (a stopping worker)."""

    def counts(self) -> dict[str, int]:
        """Owner-days by state: ``open``, ``claimed``, ``done``."""


class ClaimingStore(SweepStore, Protocol):
    """A sweep store that several worker processes share (PostgreSQL)."""

    def claims(self) -> OwnerClaims: ...


class Llm(Protocol):
    """An inference backend. Errors are always ``tether.errors.LlmError`` subclasses."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one completion; raises ContextFullError when the prompt does not fit."""
        ...

    async def aclose(self) -> None:
        """Release connections; the backend is unusable afterwards."""
        ...


class Producer(Protocol):
    """Gives the sweep a day's packet, or says why the day is not ready."""

    def produce(self, owner: _sweep.Owner, window: Window) -> DailySweepInput | Incomplete: ...


class ModelStages(Protocol):
    """Where the sweep's model pass keeps each owner-day's invocation record, so that no
    day's model is called while another call for it may still run (``sweep.stage``
    encodes, reads and fences the records): the home's stage files
    (``sweep.stage.FileStages``), or the store's ``sweep_model_stage``
    (``stores.postgres_sweep_stage``), where a sweep worker with no home keeps them."""

    def now(self) -> datetime:
        """The clock the marks' leases are on (the wall clock, or the database server's)."""
        ...

    def load(self, owner: str, local_date: date) -> bytes | None:
        """The day's record as written (a file's lines, the last complete one saying where
        the invocation is; a table's one record); None: no invocation yet. Raises
        OSError when a file cannot be read."""
        ...

    def days(self, owner: str) -> list[date]:
        """The local dates the owner has a record for, oldest first."""
        ...

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        """The ``invoked`` record, durably (fsynced, or committed) before the invocation's
        first model request; False, with nothing written, when the day has a record
        already (another runner owns its invocation)."""
        ...

    def replace(
        self, owner: str, local_date: date, expected: bytes, record: bytes, state: str
    ) -> bool:
        """Make ``record`` (whose state is ``state``) the day's record only while the
        current one is exactly ``expected``; False, with nothing written, otherwise."""
        ...

    def remove(self, owner: str, local_date: date, expected: bytes) -> bool:
        """Forget the day's record only while it is exactly ``expected``."""
        ...


class Embedder(Protocol):
    """A sentence-embedding model, run in process and offline (``llm.embedder``). Texts
    in, one L2-normalised float32 row per text out; ``model_id`` names the model and its
    version, so the vectors it made are told from another model's."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """An ``(len(texts), dim)`` array; raises ``EmbedderError``."""
        ...


class VectorIndex(Protocol):
    """Where the vectors of indexed rows are kept and searched (``stores.sqlite_vectors``).
    A row's vectors go when the row goes or its text is rewritten."""

    def close(self) -> None: ...

    def vector_counts(self, model: str) -> VectorCounts:
        """Rows that take a vector (every indexed row but tool calls) and how many have
        one from ``model``."""
        ...

    def missing_vectors(self, model: str, limit: int, *, after: int = 0) -> list[VecSource]:
        """Up to ``limit`` rows (doc id above ``after``, in id order) with no vector from
        ``model``."""
        ...

    def put_vectors(
        self,
        model: str,
        rows: Sequence[tuple[int, Matrix]],
        *,
        texts: Mapping[int, str] | None = None,
    ) -> None:
        """Store each doc id's vectors (one row per part of its text), replacing any it
        had, in one transaction; a doc id no longer indexed is skipped, and so, given
        ``texts`` (each doc's text as embedded), is one whose text changed since (a
        redaction raced the embedding: the old text's vector must not be kept; the row
        stays missing and is embedded afresh)."""
        ...

    def nearest(
        self, model: str, query: Matrix, k: int, *, only: Sequence[str] | None = None
    ) -> list[Found]:
        """The ``k`` rows whose best part is nearest ``query`` (one vector), best first,
        ``score`` the cosine similarity; among the rows of the refs ``only`` if given."""
        ...

    def maintain(self, model: str, *, progress: Progress | None = None) -> int:
        """Bring what speeds up ``nearest`` in step with ``model``'s vectors (the
        approximate graph at scale; nothing below it), off the query path; the vectors
        it took in."""
        ...
