"""The short form of the fact extractor, for small models (the bundled SmolLM2-135M):
``{"facts": [{"turn": 3, "fact": "..."}]}``, validated and mapped into the same
``Draft`` as a full candidate page (``core.learning.extraction``), so the rest (authority earned
by a verbatim quote, the caps, the slot keys) is shared.

Why a second form: a 135M model cannot fill the full page (slot keys, session lists,
quotes) and, asked to, loops until its token limit. Two fields it can fill; the turn is
an enum of the owner turns it was shown, so a citation is always a real turn. Nothing it
writes is trusted: a fact must be grounded in the turn it cites (at least half of its
content words are words of that turn, and at least ``MIN_CONTENT`` of them), else it is
dropped (``dropped_invalid``); its slot is derived from its words, as the extractive
path derives one (``core.learning.statements``); its own text is its quote, so copying the owner's
words earns ``direct_user_statement`` and a paraphrase ``sweep_inference``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.core.learning.extraction import (
    MAX_TEXT,
    Draft,
    DraftMemory,
    ExtractionError,
    clean_text,
    decode,
)
from tether.core.learning.statements import content_words, entity_for
from tether.records import ExtractionRequest, SourceTurn

#: Facts one reply may list (the array's bound in the grammar).
MAX_FACTS = 6
#: A grounded fact carries at least this many content words (as the extractive path's
#: plain statements: "12 June" alone says nothing).
MIN_CONTENT = 3
#: Share of a fact's content words that must be words of the turn it cites.
GROUNDED_SHARE = 0.5


def list_schema(turns: Sequence[int], max_facts: int = MAX_FACTS) -> dict[str, Any]:
    """The JSON schema of the short form. No ``maxLength``: in llama.cpp's grammars a
    bounded string is a chain of optional characters that measured 2.7 times slower a
    token with SmolLM2 on 2 cores; the reply's ``max_tokens`` bounds it instead."""
    turn: dict[str, Any] = {"type": "integer", "minimum": 0}
    if turns:
        turn = {"type": "integer", "enum": sorted(set(turns))}
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": max(0, max_facts),
                "items": {
                    "type": "object",
                    "properties": {"turn": turn, "fact": {"type": "string"}},
                    "required": ["turn", "fact"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["facts"],
        "additionalProperties": False,
    }


def render_list_source(turns: Sequence[SourceTurn]) -> str:
    """Turns as the small model reads them: ``Turn 3 (user): text``, one a line."""
    who = {"owner": "user", "assistant": "assistant"}
    return "\n".join(f"Turn {t.turn} ({who[t.role]}): {' '.join(t.text.split())}" for t in turns)


def parse_list(content: str, request: ExtractionRequest) -> Draft:
    """The short form's reply as a ``Draft`` (raises ExtractionError when it is not a
    list of facts at all, even salvaged)."""
    value = decode(content)
    items = value.get("facts") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ExtractionError("malformed_output", content)
    by_turn = {t.turn: t for t in request.turns if t.role == "owner"}
    limit = max(0, min(request.max_memories, MAX_FACTS))
    memories: list[DraftMemory] = []
    seen: set[str] = set()
    dropped = 0
    for raw in items:
        turn = raw.get("turn") if isinstance(raw, dict) else None
        text = clean_text(raw.get("fact"), MAX_TEXT) if isinstance(raw, dict) else ""
        source = anchor(text, by_turn, turn if isinstance(turn, int) else None)
        if source is None or len(memories) >= limit:
            dropped += 1
            continue
        entity = entity_for(text)
        if entity in seen:
            dropped += 1
            continue
        seen.add(entity)
        memories.append(
            DraftMemory(
                text=text,
                subject="owner",
                entity=entity,
                sessions=(source.session,),
                first_turn=source.turn,
                last_turn=source.turn,
                quote=text,
            )
        )
    return Draft(
        memories=tuple(memories),
        folders=(),
        dropped_provenance=0,
        dropped_invalid=dropped,
        folders_dropped=0,
    )


def anchor(text: str, by_turn: dict[int, SourceTurn], cited: int | None) -> SourceTurn | None:
    """The owner turn ``text`` is grounded in: the cited one when it is, else the shown
    owner turn sharing the most content words with it (a small model copies well and
    counts badly), nearest the cited number on a tie; None when no turn grounds it."""
    held = by_turn.get(cited) if cited is not None else None
    if held is not None and grounded(text, held.text):
        return held
    words = set(content_words(text))
    best: tuple[int, int] | None = None
    pick: SourceTurn | None = None
    for t in by_turn.values():
        if not grounded(text, t.text):
            continue
        rank = (-len(words & set(content_words(t.text))), abs(t.turn - (cited or 0)))
        if best is None or rank < best:
            best, pick = rank, t
    return pick


def grounded(fact: str, turn_text: str) -> bool:
    """Whether ``fact`` says something of ``turn_text``: enough content words, at least
    ``GROUNDED_SHARE`` of them words of the turn (so an invented fact is dropped)."""
    words = set(content_words(fact))
    if len(words) < MIN_CONTENT:
        return False
    source = set(content_words(turn_text))
    return len(words & source) >= max(MIN_CONTENT, GROUNDED_SHARE * len(words))


def sized_runs(turns: Sequence[SourceTurn], size: int, overhead: int) -> list[list[SourceTurn]]:
    """Turns in runs, in order, whose text plus ``overhead`` characters a turn (its
    rendering) stays under ``size`` (a longer turn is a run alone)."""
    out: list[list[SourceTurn]] = []
    run: list[SourceTurn] = []
    used = 0
    for t in turns:
        cost = len(t.text) + overhead
        if run and used + cost > size:
            out.append(run)
            run, used = [], 0
        run.append(t)
        used += cost
    if run:
        out.append(run)
    return out


def runs(turns: Sequence[SourceTurn], size: int) -> list[list[SourceTurn]]:
    """Turns in runs whose text stays under ``size`` characters (a longer turn is a run
    alone), in order; a run with no owner turn is left out (nothing to cite)."""
    return [r for r in sized_runs(turns, size, 24) if any(t.role == "owner" for t in r)]
