"""The sweep's paths to a day's facts besides the full two-phase page (``sweep.model``):
the owner's own statements of the day (``core.learning.statements``, no model), the short form
for small models (``core.learning.fact_list``: one call per run of a session's turns), and how
the two merge into one page (``[extract] mode = "both"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import msgspec

from tether.core.learning import fact_list
from tether.core.learning.extraction import ExtractionError
from tether.core.learning.statements import statements
from tether.core.sweep.packet import MAX_CANDIDATES
from tether.extract.extractor import Extractor
from tether.records import (
    Completion,
    CompletionRequest,
    ExtractedFact,
    Extraction,
    ExtractionRequest,
)
from tether.sweep import spine

#: Short-form calls one day may make (``[extract] form = "list"``).
MAX_LIST_CALLS = 24


def extractive_page(day: spine.Day) -> Extraction:
    """The owner's own statements of the day: owner rows only, never one read after
    untrusted content; each cites its turn and earns ``direct_user_statement``."""
    facts: list[ExtractedFact] = []
    for row in day.rows:
        owned = [r for r in row.rows if r.field == "user" and not r.tainted]
        facts.extend(statements(spine.source_turns(owned)))
    return Extraction(facts=tuple(facts))


def list_pass(
    call: Callable[[CompletionRequest], Completion],
    extractor: Extractor,
    day: spine.Day,
    *,
    chunk_chars: int,
    counts: Counter[str],
    usage: list[tuple[int, int, int]],
) -> Extraction:
    """The short form over the day: one call per run of a session's turns, at most
    ``MAX_LIST_CALLS``; each reply validated on its own (a malformed one is counted and
    the others kept; every reply malformed raises the last ExtractionError)."""
    facts: list[ExtractedFact] = []
    dropped = calls = malformed = 0
    last: ExtractionError | None = None
    for row in day.rows:
        for run in fact_list.runs(spine.source_turns(row.rows), chunk_chars):
            if calls >= MAX_LIST_CALLS:
                counts["list_runs_skipped"] += 1
                continue
            request = ExtractionRequest(
                instructions="", source="", sessions=(row.session,), turns=tuple(run)
            )
            completion = call(extractor.completion_request(request))
            calls += 1
            usage.append((completion.cache_n, completion.prompt_n, completion.predicted_n))
            try:
                page = extractor.read_page(completion.content, request)
            except ExtractionError as exc:
                malformed, last = malformed + 1, exc
                continue
            facts.extend(page.facts)
            dropped += page.dropped_invalid
    counts["list_malformed"] += malformed
    if calls and malformed == calls and last is not None:
        raise last
    return Extraction(facts=tuple(facts), dropped_invalid=dropped)


def merge(first: Extraction, then: Extraction | None) -> Extraction:
    """``first``'s facts (the owner's own statements), then ``then``'s (the model's) in
    slots still free, within a packet's bound; ``then``'s folders and counts."""
    if then is None:
        return msgspec.structs.replace(first, facts=first.facts[:MAX_CANDIDATES])
    seen: set[tuple[str, str]] = set()
    facts: list[ExtractedFact] = []
    for f in (*first.facts, *then.facts):
        if (f.subject, f.entity) not in seen and len(facts) < MAX_CANDIDATES:
            seen.add((f.subject, f.entity))
            facts.append(f)
    return msgspec.structs.replace(then, facts=tuple(facts))


def said(exc: BaseException) -> str:
    """What the log says of a failure: a malformed reply's trimmed excerpt, else the
    error's message."""
    if isinstance(exc, ExtractionError):
        return f"the reply is not JSON: {' '.join(exc.excerpt.split())[:120]!r}"
    return str(exc)
