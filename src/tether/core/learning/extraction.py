"""The pure half of the shared fact extractor (``tether.extract``): the JSON schema of a
candidate page, its parsing and validation into typed records, the provenance check,
the verbatim-quote authority check and the clamping.

A page is ``{"memories": [...], "folders": [...]}``. Each memory names its text, its
slot (``subject`` scope and ``entity``), the sessions it came from, optionally a turn
range and a quote. Nothing the model says is trusted as is:

- a memory citing no session of the source is dropped and counted (``dropped_provenance``);
  cited sessions outside the source are removed;
- text is stripped of control characters and clamped to ``MAX_TEXT``; subject and entity
  are folded to keys (``[a-z0-9._:-]``, at most 64); a memory left without them is dropped
  (``dropped_invalid``), as is every memory past the page's bound;
- authority is earned: ``direct_user_statement`` only when the quote appears verbatim
  (whitespace and quote marks aside) in an owner turn the memory cites,
  ``agent_reusable_conclusion`` when it appears in a cited assistant turn, else
  ``sweep_inference``; never above the caller's cap. A quote too short to mean anything
  (under ``MIN_QUOTE_CHARS`` or one word) earns nothing.

Two steps, because checking a quote needs the stored turns it cites: ``parse_page``
gives a ``Draft`` and the turn ranges it cites (``Draft.ranges``); the caller reads those
turns and ``finish`` earns the authorities.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec

from tether.errors import TetherError
from tether.records import (
    ExtractedFact,
    Extraction,
    ExtractionRequest,
    ExtractionUsage,
    FactAuthority,
    FolderAssignment,
    Provenance,
    SourceTurn,
)

#: The same bounds as the sweep packet (``core.sweep.packet``): text, refs, candidates.
MAX_TEXT = 1000
MAX_SESSIONS = 8
MAX_MEMORIES = 32
MAX_KEY = 64
MAX_QUOTE = 400
MIN_QUOTE_CHARS = 8
#: A cited turn range spans at most this many turns (a longer one is cut to its start).
MAX_TURN_SPAN = 64
MAX_FOLDER = 64
MAX_FOLDERS = 64

#: The reply's form: the full candidate page, or the short list for small models
#: (``core.learning.fact_list``).
Form = Literal["page", "list"]

RANK: dict[str, int] = {
    "sweep_inference": 1,
    "agent_reusable_conclusion": 2,
    "direct_user_statement": 3,
}

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NOT_KEY = re.compile(r"[^a-z0-9._:-]+")
_KEY = re.compile(r"[a-z0-9][a-z0-9._:-]{0,63}")
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


class ExtractionError(TetherError):
    """The model's reply is not a candidate page at all (not JSON, not an object): the
    reason code and an excerpt. One bad memory inside a page is dropped, not this."""

    def __init__(self, reason: str, excerpt: str = "") -> None:
        super().__init__(f"the model's candidate page is unusable ({reason}): {excerpt[:120]!r}")
        self.reason = reason
        self.excerpt = excerpt[:120]


# -- the schema ---------------------------------------------------------------------------


def page_schema(
    *, sessions: Sequence[str], folder_sessions: Sequence[str] = (), max_memories: int = 32
) -> dict[str, Any]:
    """The JSON schema a candidate page must follow (llama-server ``response_format``,
    the embedded backend's grammar). Cited sessions are an enum of the source's; the
    folders part is there only when ``folder_sessions`` is not empty. Strings carry no
    ``maxLength``: llama.cpp's grammar for one is a chain of optional characters, measured
    2.7 times slower a token (SmolLM2-135M, 2 cores), which pushed a day's page past
    ``[llm] timeout_s``; ``parse_page`` clamps every string instead."""
    session_item: dict[str, Any] = {"type": "string"}
    if sessions:
        session_item["enum"] = sorted(set(sessions))
    memory = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "subject": {"type": "string"},
            "entity": {"type": "string"},
            "sessions": {
                "type": "array",
                "items": session_item,
                "minItems": 1,
                "maxItems": MAX_SESSIONS,
            },
            "first_turn": {"type": "integer", "minimum": 0},
            "last_turn": {"type": "integer", "minimum": 0},
            "quote": {"type": "string"},
        },
        "required": ["text", "subject", "entity", "sessions"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {
        "memories": {
            "type": "array",
            "items": memory,
            "maxItems": max(0, min(max_memories, MAX_MEMORIES)),
        }
    }
    required = ["memories"]
    if folder_sessions:
        properties["folders"] = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "session": {"type": "string", "enum": sorted(set(folder_sessions))},
                    "folder": {"type": "string"},
                },
                "required": ["session", "folder"],
                "additionalProperties": False,
            },
            "maxItems": min(len(set(folder_sessions)), MAX_FOLDERS),
        }
        required.append("folders")
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def render_turns(turns: Iterable[SourceTurn], *, cap: int | None = None) -> str:
    """Turns as the model reads them, one block each, headed by what a memory cites:
    ``[session s1 turn 4] owner:``. ``cap`` bounds the whole text (cut at a block)."""
    out: list[str] = []
    size = 0
    for t in turns:
        block = f"[session {t.session} turn {t.turn}] {t.role}: {t.text.strip()}"
        if cap is not None and size + len(block) + 1 > cap:
            break
        out.append(block)
        size += len(block) + 1
    return "\n".join(out)


# -- a reply cut short ---------------------------------------------------------------------


def decode(content: str) -> Any:
    """``content`` as JSON, or its salvaged prefix (``salvage``); ExtractionError when
    neither is JSON."""
    try:
        return msgspec.json.decode(content.strip() or "null")
    except msgspec.DecodeError:
        pass
    fixed = salvage(content)
    if fixed is not None:
        try:
            return msgspec.json.decode(fixed)
        except msgspec.DecodeError:
            pass
    raise ExtractionError("malformed_output", content)


def salvage(content: str) -> str | None:
    """The longest prefix of a cut JSON reply that ends after a complete array item,
    closed: ``{"facts": [{...}, {"tu`` -> ``{"facts": [{...}]}``. None when no item was
    complete (or the text does not start as an object)."""
    text = content.strip()
    if not text.startswith("{"):
        return None
    stack: list[str] = []
    in_string = escaped = False
    best: tuple[int, tuple[str, ...]] | None = None
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack[-1] != ch:
                return None
            stack.pop()
            if not stack:
                return text[: i + 1]
            if stack[-1] == "]":  # an item of an array is complete here
                best = (i + 1, tuple(stack))
    if best is None:
        return None
    end, open_ = best
    return text[:end] + "".join(reversed(open_))


# -- parsing -------------------------------------------------------------------------------


class DraftMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A memory that passed every check but the authority one."""

    text: str
    subject: str
    entity: str
    sessions: tuple[str, ...]
    first_turn: int | None
    last_turn: int | None
    quote: str | None


class Draft(msgspec.Struct, frozen=True, kw_only=True):
    memories: tuple[DraftMemory, ...]
    folders: tuple[FolderAssignment, ...]
    dropped_provenance: int
    dropped_invalid: int
    folders_dropped: int

    def ranges(self) -> tuple[tuple[str, int, int], ...]:
        """The (session, first, last) turn ranges quoting memories cite, each once."""
        seen: dict[tuple[str, int, int], None] = {}
        for m in self.memories:
            if m.quote is None or m.first_turn is None or m.last_turn is None:
                continue
            for s in m.sessions:
                seen[(s, m.first_turn, m.last_turn)] = None
        return tuple(seen)


def fold_key(value: object) -> str | None:
    """``value`` folded to a slot key (lower case, runs of other characters to ``-``),
    or None when nothing usable is left."""
    if not isinstance(value, str):
        return None
    key = _NOT_KEY.sub("-", value.strip().lower()).strip("-._:")[:MAX_KEY]
    return key if _KEY.fullmatch(key) else None


def clean_text(value: object, limit: int) -> str:
    """Control characters out, surrounding space off, at most ``limit`` characters."""
    if not isinstance(value, str):
        return ""
    return _CONTROL.sub(" ", value).strip()[:limit].strip()


def folder_name(value: object) -> str | None:
    """A folder name as the owner may set one: 1 to 64 printable characters, no ``/``,
    single spaces; None when nothing usable is left."""
    if not isinstance(value, str):
        return None
    name = " ".join(_CONTROL.sub(" ", value).replace("/", " ").split())[:MAX_FOLDER].strip()
    return name or None


def parse_page(content: str, request: ExtractionRequest) -> Draft:
    """Decode and validate the model's reply; raise ExtractionError when it is not a
    page at all. Every per-memory and per-folder problem is dropped and counted."""
    page = decode(content)
    if not isinstance(page, dict) or not isinstance(page.get("memories", []), list):
        raise ExtractionError("malformed_output", content)
    allowed = set(request.sessions)
    limit = max(0, min(request.max_memories, MAX_MEMORIES))
    memories: list[DraftMemory] = []
    dropped_provenance = dropped_invalid = 0
    for raw in page.get("memories", []):
        if not isinstance(raw, dict):
            dropped_invalid += 1
            continue
        cited = raw.get("sessions")
        sessions = tuple(
            dict.fromkeys(s for s in cited if isinstance(s, str) and s in allowed)
            if isinstance(cited, list)
            else ()
        )[:MAX_SESSIONS]
        if not sessions:
            dropped_provenance += 1
            continue
        text = clean_text(raw.get("text"), MAX_TEXT)
        subject, entity = fold_key(raw.get("subject")), fold_key(raw.get("entity"))
        if not text or subject is None or entity is None or len(memories) >= limit:
            dropped_invalid += 1
            continue
        first, last = _range(raw.get("first_turn"), raw.get("last_turn"))
        quote = clean_text(raw.get("quote"), MAX_QUOTE) or None
        memories.append(
            DraftMemory(
                text=text,
                subject=subject,
                entity=entity,
                sessions=sessions,
                first_turn=first,
                last_turn=last,
                quote=quote,
            )
        )
    folders, folders_dropped = _folders(page.get("folders", []), request.folder_sessions)
    return Draft(
        memories=tuple(memories),
        folders=folders,
        dropped_provenance=dropped_provenance,
        dropped_invalid=dropped_invalid,
        folders_dropped=folders_dropped,
    )


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _range(first: object, last: object) -> tuple[int | None, int | None]:
    a, b = _int(first), _int(last)
    if a is None and b is None:
        return None, None
    a = b if a is None else a
    b = a if b is None else b
    assert a is not None
    assert b is not None
    if a > b:
        a, b = b, a
    return a, min(b, a + MAX_TURN_SPAN - 1)


def _folders(raw: object, offered: Sequence[str]) -> tuple[tuple[FolderAssignment, ...], int]:
    if not isinstance(raw, list):
        return (), 1
    allowed = set(offered)
    out: dict[str, FolderAssignment] = {}
    dropped = 0
    for item in raw:
        session = item.get("session") if isinstance(item, dict) else None
        name = folder_name(item.get("folder")) if isinstance(item, dict) else None
        if not isinstance(session, str) or session not in allowed or name is None:
            dropped += 1
        elif session in out:
            dropped += 1  # the first assignment of a session wins
        else:
            out[session] = FolderAssignment(session=session, folder=name)
    return tuple(out.values()), dropped


# -- authority -----------------------------------------------------------------------------


def normalise(text: str) -> str:
    """What the verbatim check compares: quote marks unified, whitespace runs to one
    space, surrounding space and quote marks off. Case and every word stay."""
    return " ".join(text.translate(_QUOTES).split()).strip("\"' ")


def earn(
    quote: str | None,
    sessions: Sequence[str],
    *,
    first: int | None,
    last: int | None,
    turns: Iterable[SourceTurn],
    cap: FactAuthority,
) -> tuple[FactAuthority, SourceTurn | None]:
    """The authority a memory earns by its quote, and the turn the quote was found in
    (an owner turn before an assistant one); never above ``cap``."""
    needle = normalise(quote or "")
    if len(needle) < MIN_QUOTE_CHARS or " " not in needle:
        return "sweep_inference", None
    cited = set(sessions)
    found: SourceTurn | None = None
    for t in turns:
        if t.session not in cited:
            continue
        if first is not None and last is not None and not first <= t.turn <= last:
            continue
        if needle in normalise(t.text):
            if t.role == "owner":
                found = t
                break
            if found is None:
                found = t
    if found is None:
        return "sweep_inference", None
    earned: FactAuthority = (
        "direct_user_statement" if found.role == "owner" else "agent_reusable_conclusion"
    )
    return (earned if RANK[earned] <= RANK[cap] else cap), found


def finish(
    draft: Draft,
    request: ExtractionRequest,
    turns: Iterable[SourceTurn] = (),
    *,
    usage: ExtractionUsage | None = None,
    raw: str = "",
) -> Extraction:
    """The page with earned authorities, checking quotes against ``request.turns`` and
    ``turns`` (what the caller read for ``draft.ranges()``)."""
    pool = list(request.turns) + list(turns)
    facts: list[ExtractedFact] = []
    for m in draft.memories:
        authority, where = earn(
            m.quote, m.sessions, first=m.first_turn, last=m.last_turn, turns=pool, cap=request.cap
        )
        facts.append(
            ExtractedFact(
                text=m.text,
                subject=m.subject,
                entity=m.entity,
                authority=authority,
                provenance=Provenance(
                    sessions=m.sessions,
                    segment=request.segment,
                    first_turn=m.first_turn,
                    last_turn=m.last_turn,
                    quote=m.quote if where is not None else None,
                    quote_session=where.session if where is not None else None,
                    quote_turn=where.turn if where is not None else None,
                ),
            )
        )
    return Extraction(
        facts=tuple(facts),
        folders=draft.folders,
        dropped_provenance=draft.dropped_provenance,
        dropped_invalid=draft.dropped_invalid,
        folders_dropped=draft.folders_dropped,
        usage=usage or ExtractionUsage(),
        raw=raw,
    )
