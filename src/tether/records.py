"""Typed records, the vocabulary every layer shares: the session-log union and the chat
messages built from it, what the memory store holds and recall returns (``Hit``,
``Found``, ``Note``, ``Page``, ...), what a search asks for (``SearchQuery``), and what an
inference backend takes and returns (``CompletionRequest``, ``Completion``). Pure data:
no I/O, no tether imports.

A session log is one JSON object a line, tagged by ``type``. Decoding is strict: an
unknown field, a missing field or a wrong type is an error, and every record carries a
UTC ``time``. These types are pure data; reading and writing files is ``tether.sessions``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

import msgspec

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
UtcTime = Annotated[datetime, msgspec.Meta(tz=True)]


def is_utc(time: datetime) -> bool:
    """True for a time whose zone is UTC (msgspec decodes ``Z`` and ``+00:00`` to ``UTC``)."""
    return time.tzinfo is UTC or time.utcoffset() == UTC.utcoffset(None)


class _LogRecord(
    msgspec.Struct, tag_field="type", forbid_unknown_fields=True, frozen=True, kw_only=True
):
    # Aware is checked by the decoder; UTC is checked where logs are read and written
    # (tether.sessions), once per record in a loop that runs anyway: a __post_init__
    # would cost a Python call per record and dominate replay time.
    time: UtcTime


class SessionStart(_LogRecord, tag=True, frozen=True, omit_defaults=True):
    """First record of every epoch log: which epoch, which slot, which baseline.

    ``imported``: the epoch was written by ``sessions import`` (its last line may well be
    the owner's, with no answer after it: that is the history, not a turn a killed
    process left open). Absent, as in every log written before it, means false."""

    epoch: NonNegative
    slot: NonNegative
    baseline: str
    imported: bool = False


class User(_LogRecord, tag=True, frozen=True, omit_defaults=True):
    """An owner (or scheduler) message: one turn. ``retry``: the same message again in
    the next epoch, after the previous epoch refused it as context-full and compacted;
    it continues that turn (not counted, not indexed again)."""

    text: str
    speaker: str | None = None
    retry: bool = False


class Assistant(_LogRecord, tag=True, frozen=True):
    """The model's text reply (possibly followed by the ToolCalls of the same message)."""

    text: str


class ToolCall(_LogRecord, tag=True, frozen=True):
    """A tool call the model asked for, recorded before it runs."""

    id: str
    name: str
    args: dict[str, Any]


class ToolResult(_LogRecord, tag=True, frozen=True):
    """What a tool returned; ``untrusted`` content taints the session."""

    tool_call_id: str
    content: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class ToolSummary(_LogRecord, tag=True, frozen=True):
    """An index-only summary of a ToolResult; never part of the replayed prefix."""

    call: str
    tool_call_id: str
    content: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class Usage(_LogRecord, tag=True, frozen=True):
    """Token accounting of one request, as the server reported it."""

    cache_n: NonNegative
    prompt_n: NonNegative
    predicted_n: NonNegative


TurnErrorKind = Literal[
    "session_full",  # the prompt does not fit the slot, even after compaction (not replayed)
    "llm_unreachable",
    "llm_timeout",
    "llm_protocol",
    "tool_step_limit",  # the tool loop hit its step limit
    "interrupted",  # the process stopped mid-turn (closed then, or at the next open)
    "budget",  # a later step of the tool loop was refused by [budget]
]


class TurnError(_LogRecord, tag=True, frozen=True):
    """A turn that ended without an answer; the log stays valid."""

    kind: TurnErrorKind


class EpochEnd(_LogRecord, tag=True, frozen=True):
    """Last record of a compacted epoch: the next epoch number and the carried summary."""

    next: Annotated[int, msgspec.Meta(ge=1)]
    summary: str


LogRecord = (
    SessionStart
    | User
    | Assistant
    | ToolCall
    | ToolResult
    | ToolSummary
    | Usage
    | TurnError
    | EpochEnd
)


class ToolSchema(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A tool offered to the model, in OpenAI function form."""

    name: str
    description: str
    parameters: dict[str, Any]


class Baseline(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The fixed prefix of an epoch: system prompt, memory block and tool schemas."""

    system: str
    memory: str
    tools: tuple[ToolSchema, ...] = ()


# -- chat messages (what goes to the model) -----------------------------------------


class ToolCallRequest(msgspec.Struct, frozen=True):
    """A tool call inside an assistant message (OpenAI form, arguments as a JSON object)."""

    id: str
    name: str
    args: dict[str, Any]


class ChatMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """One chat message. ``tool_calls`` only on assistant messages, ``tool_call_id`` on tool."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None


# -- memory: what the Store holds and recall returns ----------------------------------

#: ``session-summary`` / ``epoch-summary``: a unit standing for a range of turns
#: (``core.recall.summaries``); ``summary``: a tool result's summary, a row of its turn.
HitKind = Literal[
    "turn", "summary", "page", "fact", "note", "identity", "session-summary", "epoch-summary"
]
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
    #: Stable key of what was found (``note:12``, ``page:slug``, ``turn:s1:4``,
    #: ``identity:m-3fa2c1``, ``fact:7``), used by
    #: the recalls log so counts survive a re-index.
    ref: str
    #: When what was found was written (a turn's record, a page's update); None where
    #: the search does not say.
    time: datetime | None = None
    #: A summary unit's range (``core.recall.summaries``): the turns it covers, its epoch (None
    #: for a session's digest) and when its first turn was written (``time``: its last).
    first_turn: int | None = None
    last_turn: int | None = None
    epoch: int | None = None
    first_time: datetime | None = None


class Found(msgspec.Struct, frozen=True):
    """One indexed row a search found, with what ranking needs (``core.recall.ranking``).

    ``score``: positive, higher is better (0 from ``newest``, which does not rank);
    ``ref``: ``turn:<session>:<turn>`` for log rows, as in ``Hit``."""

    id: int
    kind: HitKind
    session: str | None
    turn: int | None
    field: LogField | None
    tainted: bool
    ref: str
    time: datetime
    text: str
    score: float


class LogRow(msgspec.Struct, frozen=True):
    """A searchable piece of a session log, as the indexer hands it to the store."""

    session: str
    epoch: int
    turn: int
    field: LogField
    text: str
    tainted: bool
    time: datetime


class VecSource(msgspec.Struct, frozen=True):
    """An indexed row that has no vector yet from the current model: its ``doc`` id and
    the (redacted) text the index keeps, what the embedder is given."""

    doc: int
    text: str
    field: LogField | None = None  # None: a note, page, identity entry or fact


class VectorCounts(msgspec.Struct, frozen=True):
    """How many rows that take a vector have one from a model, of how many."""

    done: int
    total: int

    @property
    def complete(self) -> bool:
        return self.done >= self.total


class IndexCursor(msgspec.Struct, frozen=True):
    """How far a log file has been indexed: byte offset, the session's turn number and
    taint at that offset (so an incremental pass resumes with the right numbering)."""

    path: str
    offset: int
    turn: int
    tainted: bool
    #: Complete lines before ``offset``, so an error further on names the right line.
    lines: int = 0
    #: The file as the pass that wrote this cursor found it (``os.stat``: size, mtime in
    #: ns, inode): a pass skips a log whose state is the same, unread. None: not known
    #: (a cursor from before schema 9, or written by a test).
    size: int | None = None
    mtime_ns: int | None = None
    ino: int | None = None
    #: CRC-32 of the (up to 64) bytes before ``offset``: a log that grew is read on from
    #: ``offset`` only when they are still there (else it was rewritten).
    tail: int | None = None


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


class TextCell(msgspec.Struct, frozen=True):
    """One stored memory text (``Store.read_cells``): where it is and what it holds."""

    kind: str  # note, page, journal, fact, sweep-journal, trigger, stage
    table: str
    column: str
    key: tuple[Any, ...]  # the row's key columns, as stored
    name: str  # the row as messages name it: a note id, a page slug, owner/date ...
    text: str
    busy: bool = False  # a staged day the sweep is in the middle of: must not change


#: What a ``SearchTerm`` looks for: one word, words in a row, or the start of a word.
SearchKind = Literal["term", "phrase", "prefix"]


class SearchTerm(msgspec.Struct, frozen=True):
    """One thing a search looks for, as plain text (never search syntax: each store
    renders it safely, whatever it holds).

    ``text``: a word (``term``), words that must appear in this order (``phrase``, one
    space between them), or the start of a word (``prefix``), lower-cased as the index
    holds them. ``weight``: what a match of it counts for, as a multiplier of the store's
    relevance score for this term alone."""

    text: str
    kind: SearchKind = "term"
    weight: float = 1.0


class SearchQuery(msgspec.Struct, frozen=True):
    """A search, the same for every backend: ``core.recall.query`` builds it from a question and
    each Store renders it (FTS5 on SQLite, a tsquery on PostgreSQL). It finds the rows
    holding any (``require="any"``) or all of ``terms``; with no terms, nothing."""

    terms: tuple[SearchTerm, ...] = ()
    require: Literal["any", "all"] = "any"


class RecallStat(msgspec.Struct, frozen=True):
    ref: str
    count: int
    last: datetime | None


# -- spend control: the budget gate's ledger ---------------------------------------------

#: Who spends: a background job kind of ``[budget.<kind>]``, or ``live`` (owner turns).
SpendKind = Literal["compaction", "tool_summary", "heartbeat", "cron", "sweep", "harvest", "live"]
#: Why the gate refused a call: one request over ``call_tokens``, the day's tokens over
#: ``day_tokens`` (or ``live_day_tokens``), or the day's background money over ``day_usd``.
BudgetReason = Literal["budget_call", "budget_daily", "budget_usd"]
SpendState = Literal["reserved", "settled", "refused"]


class SpentToday(msgspec.Struct, frozen=True):
    """What one local day has spent so far, as the gate weighs it: ``tokens`` of the
    request's kind and ``usd`` of all background work (reservations at their bound)."""

    tokens: int = 0
    usd: float = 0.0


class SpendRow(msgspec.Struct, frozen=True, kw_only=True):
    """One gated model call in the spend ledger. A ``reserved`` row counts at its bound
    until it is ``settled`` with the server's usage; a ``refused`` row spent nothing."""

    id: int = 0
    time: datetime
    day: str  # the owner's local date, YYYY-MM-DD
    kind: SpendKind
    session: str
    state: SpendState
    reason: BudgetReason | None = None
    bound_tokens: int
    bound_usd: float
    tokens: int = 0
    usd: float = 0.0
    cache_n: int = 0
    prompt_n: int = 0
    predicted_n: int = 0


class SpendSettle(msgspec.Struct, frozen=True, kw_only=True):
    """What one reserved call used, to replace its bound in the ledger (``id``)."""

    id: int
    tokens: int
    usd: float
    cache_n: int = 0
    prompt_n: int = 0
    predicted_n: int = 0


# -- inference: what every backend takes and returns, whatever its wire protocol --------


class CompletionRequest(msgspec.Struct, frozen=True):
    """One chat completion: the whole prompt, on an optional slot.

    ``slot`` pins the request to one of the server's slots so its KV cache stays warm
    across turns (None lets the server choose). ``json_schema`` asks for a reply that
    validates against that schema (grammar-constrained on llama-server).
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...] = ()
    slot: int | None = None
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = None
    temperature: float | None = None


class Completion(msgspec.Struct, frozen=True):
    """The model's answer and the server's token accounting for the request."""

    content: str
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str
    cache_n: int
    prompt_n: int
    predicted_n: int


# -- the shared fact extractor (``tether.extract``): what it reads and what it returns ----

#: The three authorities, strongest first (``core.sweep.packet.Authority``, the same type).
FactAuthority = Literal["direct_user_statement", "agent_reusable_conclusion", "sweep_inference"]
#: Who said a source turn: the owner (a user line) or the agent (an assistant reply).
TurnRole = Literal["owner", "assistant"]


class SourceTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One stored turn a memory may cite: its session, number, speaker and text (as the
    store holds it, redacted). The extractor checks a memory's quote against these."""

    session: str
    turn: NonNegative
    role: TurnRole
    text: str


class Provenance(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a memory came from: ids, a turn range and the quote, never other text.
    ``sessions``: every session it cites (at least one, all among the source's);
    ``segment``: the banked segment it was read from (the harvest), else None;
    ``first_turn``/``last_turn``: the turn range it cites, both or neither;
    ``quote``: the words it quotes, kept only when found verbatim in a cited turn;
    ``quote_session``/``quote_turn``: the turn the quote was found in."""

    sessions: tuple[str, ...]
    segment: str | None = None
    first_turn: int | None = None
    last_turn: int | None = None
    quote: str | None = None
    quote_session: str | None = None
    quote_turn: int | None = None


class ExtractedFact(msgspec.Struct, frozen=True, kw_only=True):
    """One memory the model proposed, validated and clamped: its text, its slot
    (``subject`` scope and ``entity``, both keys of ``[a-z0-9._:-]``), the authority it
    earned (never what the model claimed) and its provenance."""

    text: str
    subject: str
    entity: str
    authority: FactAuthority
    provenance: Provenance


class FolderAssignment(msgspec.Struct, frozen=True, kw_only=True):
    """A folder the model proposes for one of the source's unfiled sessions."""

    session: str
    folder: str


class ExtractionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller asks the extractor to read.

    ``instructions``: the system prompt; ``source``: the text shown to the model (a
    day's spine, a segment rendered by ``core.learning.extraction.render_turns``); ``prelude``:
    messages sent between the two (an earlier phase's exchange, fetched excerpts);
    ``sessions``: the session ids a memory may cite (any other is dropped and counted);
    ``folder_sessions``: the sessions the model may file (empty: no folders asked);
    ``segment``: the banked segment read, put in every memory's provenance; ``cap``: the
    highest authority a memory may earn; ``max_memories``: the page's bound; ``turns``:
    stored turns the caller already holds (a segment's, fetched excerpts'), against which
    quotes are checked besides those the extractor reads for a cited turn range."""

    instructions: str
    source: str
    sessions: tuple[str, ...]
    prelude: tuple[ChatMessage, ...] = ()
    turns: tuple[SourceTurn, ...] = ()
    folder_sessions: tuple[str, ...] = ()
    segment: str | None = None
    cap: FactAuthority = "direct_user_statement"
    max_memories: Annotated[int, msgspec.Meta(ge=0, le=32)] = 32


class ExtractionUsage(msgspec.Struct, frozen=True):
    """What one model call used, as the server reported it."""

    cache_n: int = 0
    prompt_n: int = 0
    predicted_n: int = 0


class Extraction(msgspec.Struct, frozen=True, kw_only=True):
    """The validated candidate page. ``dropped_provenance``: memories citing no session
    of the source; ``dropped_invalid``: memories with no usable text or slot, or past
    ``max_memories``; ``folders_dropped``: assignments for a session not offered or an
    unusable name; ``usage``: what the call used; ``raw``: the model's reply verbatim
    (what the sweep stages; the caller redacts before it writes anything)."""

    facts: tuple[ExtractedFact, ...]
    folders: tuple[FolderAssignment, ...] = ()
    dropped_provenance: int = 0
    dropped_invalid: int = 0
    folders_dropped: int = 0
    usage: ExtractionUsage = ExtractionUsage()
    raw: str = ""


# -- the day's rows the sweep reads from the store (not from session files) ---------------

FolderBy = Literal["owner", "sweep"]


class SessionMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What the store knows of a session beside its rows. ``owner``: whose it is (None:
    the home's owner); ``discarded_at``: the owner discarded it (the sweep skips it);
    ``folder`` and who set it (an owner-set folder always wins over the sweep's);
    ``onboarding``: one of its owner's first sessions, marked by the runtime when it was
    first indexed (never by a client flag); ``open_since``: a turn in flight since then
    (the last record the indexer read opened a turn), else None; ``first_seen``: the
    time of its first indexed record; ``imported``: its first epoch came from an import."""

    session: str
    owner: str | None = None
    discarded_at: datetime | None = None
    folder: str | None = None
    folder_by: FolderBy | None = None
    onboarding: bool = False
    open_since: datetime | None = None
    first_seen: datetime | None = None
    imported: bool = False


class SessionState(msgspec.Struct, frozen=True, kw_only=True):
    """What an indexing pass learnt of one session: whether a turn is open after the
    records it read (and since when), the time of its first record, whether it is an
    import. ``open_known``: the pass read a record that decides ``open_since``."""

    session: str
    first_time: datetime
    open_since: datetime | None
    open_known: bool
    imported: bool = False


class EpochSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A compaction's carried summary (an ``EpochEnd``), as indexed: the epoch it ended."""

    session: str
    epoch: NonNegative
    time: UtcTime
    text: str


class SessionDigest(msgspec.Struct, frozen=True, kw_only=True):
    """A session-day digest: the model's summary of the part of one session's day that
    no compaction summarised, kept so it is never made twice (key: session, window id,
    the hash of the text it read)."""

    session: str
    window_id: str
    content_hash: str
    text: str
    time: UtcTime


class ClaimedDay(msgspec.Struct, frozen=True, kw_only=True):
    """An owner-day a sweep worker holds (``OwnerClaims.claim``): who holds it and how
    many times it has been claimed (more than once: a worker before this one died or
    stalled past its lease)."""

    owner: str
    local_date: date
    claimant: str
    attempts: int
