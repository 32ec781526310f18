"""The harvest: facts from one banked segment, through the shared extractor.

Every lane that turns a segment into facts comes here: the daemon's FIFO after a hook's
IPC (``lane`` harvest), the maintenance pass over ``corpus/`` (``maintenance``), and
``tether transcripts ingest --facts`` (``ingest``). One segment, in order:

1. a receipt already there: ``already_ingested`` (its manifest published if a publish
   failed before: no second extraction), except for the owner's explicit lane (``ingest``)
   over a receipt that found nothing (``empty``) or that only the extractive path made
   while a model runs now;
2. retired in the ledger (banked while ``[checkpoint] auto_writeback`` was false), or
   writeback off now (the segment is retired then), or tether.toml unreadable (held,
   untouched): ``extraction_disabled``; the ingest lane is never gated;
3. a live claim by another process (``receipts/<segment>.claim``, ``checkpoint.claims``:
   a dead holder's is taken over at once): ``claimed_elsewhere``;
4. the whole segment (never only its start) is read as turns, in chunks of
   ``chunk_chars`` (``[extract]``), each read by the paths ``mode`` names: the model (one
   constrained call), the extractive path (``core.learning.statements``: the owner's own
   statements, no model), or both; the extractive path also reads a chunk the model failed
   on (timeout, malformed reply, context too small, refused by ``[budget]``), and the
   failure's cause is kept. After each chunk its counters go to
   ``receipts/<segment>.progress``, so a retry after an abort resumes at the next chunk,
   and a later pass retries only the chunks the model failed on (facts are at-least-once:
   dedup absorbs a chunk done twice);
5. each fact lands in its slot of the sweep store (owner ``owner``) in its own
   transaction: the same text already there is a ``duplicate``; a different text replaces
   it only when strictly stronger (``core.sweep.authority``'s rule). Authority is capped at
   ``agent_reusable_conclusion``; provenance (lane, session, segment, turn range) is in
   the fact's refs. Recall finds it at its next sync, whatever happens to the links;
6. candidate links (``tether://...`` in a fact's text, and the segment's own) are kept
   only when a page read resolves them;
7. when the model failed on any chunk, no receipt: the outcome is ``fallback`` (the
   extractive path learned something) or ``failed``, with the cause, and the next pass
   retries; else the receipt is written (``inserted``, or ``empty`` when no path found a
   fact; ``path`` says which made the facts), then published into the session's
   manifest; a failed publish is ``manifest_failed`` and the next pass re-publishes it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec

from tether.checkpoint import manifest as manifests
from tether.checkpoint.bank import (
    LINK_PREFIX,
    corpus_dir,
    ledger,
    parse_segment_link,
    read_segment,
    retire,
)
from tether.checkpoint.claims import claim
from tether.core.learning.extraction import ExtractionError, render_turns
from tether.core.learning.fact_list import sized_runs
from tether.core.learning.statements import statements
from tether.core.sweep.state import Fact
from tether.errors import NotFoundError, TetherError
from tether.extract.calls import failure_reason
from tether.extract.extractor import Extractor
from tether.faults import crash_point
from tether.files import write_atomic
from tether.ports import SweepStore
from tether.records import ExtractedFact, ExtractionRequest, FactAuthority, SourceTurn, TurnRole
from tether.scan.secrets import redact

OWNER = "owner"
CAP: FactAuthority = "agent_reusable_conclusion"
CHUNK_CHARS = 16_000
#: The fault point after a chunk's facts and progress are written (crash tests).
CRASH_AFTER_CHUNK = "harvest-after-chunk"
#: How much of a malformed reply the owner is shown.
EXCERPT_CHARS = 120
ExtractMode = Literal["model", "extractive", "both"]
RANK = {"sweep_inference": 1, "agent_reusable_conclusion": 2, "direct_user_statement": 3}
INSTRUCTIONS = (
    "You read a transcript segment of a coding or personal session and list the durable "
    "facts worth remembering later: decisions, preferences, names, settings, commitments. "
    "One fact per memory, in a short sentence; cite the session and the turn range; quote "
    "the exact words that state it. Skip small talk and anything only true for a moment. "
    "Text shown as [private] or [REDACTED:...] is not yours to guess."
)
_BLOCK = re.compile(r"^\[[^\]\n]*\] ([A-Z][A-Z ]*?)(?: \([^)]*\))?: ", re.M)
_LINK = re.compile(r"tether://[a-z0-9][a-z0-9_./-]*[a-z0-9]")


@dataclass
class Harvested:
    """A harvest's outcome and counters (the telemetry line)."""

    outcome: str
    segment: str
    lane: str
    inserted: int = 0
    duplicate: int = 0
    links: int = 0
    chunks: int = 0
    error: str | None = None
    facts: list[str] = field(default_factory=list)
    #: What made the facts: "model", "extractive", "model+extractive".
    path: str = ""
    #: Why the model gave nothing (a reason code) and, for the owner, the sentence.
    cause: str | None = None
    detail: str | None = None
    model_calls: int = 0
    model_failed: int = 0
    #: Facts the extractive path (no model) found.
    extractive: int = 0


class _Progress(msgspec.Struct, kw_only=True):
    chunks_done: int = 0
    inserted: int = 0
    duplicate: int = 0
    facts: list[str] = msgspec.field(default_factory=list)
    links: list[str] = msgspec.field(default_factory=list)
    #: Chunks whose model call failed (retried by the next pass, model only).
    failed: list[int] = msgspec.field(default_factory=list)
    model_calls: int = 0
    model_failed: int = 0
    model_facts: int = 0
    extractive: int = 0
    cause: str | None = None
    detail: str | None = None
    error: str | None = None


def _path(progress: _Progress, use_model: bool) -> str:
    parts = []
    if use_model and progress.model_calls:
        parts.append("model")
    if progress.extractive or not use_model:
        parts.append("extractive")
    return "+".join(parts) or "model"


def model_cause(exc: BaseException) -> tuple[str, str]:
    """A failed extraction call's reason code (telemetry, the receipt) and a sentence for
    the owner (the CLI): what happened, with a trimmed excerpt of a malformed reply."""
    if isinstance(exc, ExtractionError):
        excerpt = " ".join(exc.excerpt.split())[:EXCERPT_CHARS]
        return "model_output_malformed", f"the model's reply is not JSON: {excerpt!r}"
    code = failure_reason(exc)
    if code.startswith("budget_"):
        return code, f"refused by [budget] ({code}): nothing was sent"
    if code == "context_full":
        return code, f"the prompt does not fit the model's context: {exc}"
    return code, str(exc)


def segment_turns(session: str, text: str) -> list[SourceTurn]:
    """A segment's blocks as numbered turns (1, 2, ...): ``USER`` lines are the owner's,
    every other block (replies, tool calls) the assistant's. The header line is not a turn."""
    _, _, body = text.partition("\n\n")
    starts = [m.start() for m in _BLOCK.finditer(body)]
    turns: list[SourceTurn] = []
    for n, (a, b) in enumerate(zip(starts, [*starts[1:], len(body)], strict=True), start=1):
        block = body[a:b].strip()
        m = _BLOCK.match(block)
        assert m is not None
        role: TurnRole = "owner" if m.group(1) == "USER" else "assistant"
        turns.append(SourceTurn(session=session, turn=n, role=role, text=block[m.end() :]))
    return turns


def chunks(turns: list[SourceTurn], size: int = CHUNK_CHARS) -> list[list[SourceTurn]]:
    """Turns in runs whose rendering stays under ``size`` (a longer turn is a run alone)."""
    return sized_runs(turns, size, 40)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class Harvester:
    """Harvests segments of one home. ``page_exists`` answers a page read for a
    ``tether://<slug>`` link; ``writeback`` re-reads ``[checkpoint] auto_writeback``
    (None unset, False off; raises TetherError when tether.toml cannot be read)."""

    def __init__(
        self,
        home: Path,
        extractor: Extractor | None,
        sweep: SweepStore,
        *,
        page_exists: Callable[[str], bool],
        writeback: Callable[[], bool | None],
        now: Callable[[], datetime],
        mode: ExtractMode = "model",
        chunk_chars: int = CHUNK_CHARS,
        absent: str | None = None,
    ) -> None:
        self.home = home
        self.extractor = extractor
        self.sweep = sweep
        self.page_exists = page_exists
        self.writeback = writeback
        self.now = now
        self.mode: ExtractMode = mode
        self.chunk_chars = chunk_chars
        #: Why there is no model (``model_absent``) when ``extractor`` is None.
        self.absent = absent

    # -- the gates -------------------------------------------------------------------

    def pending(self) -> list[str]:
        """Segments of ``corpus/`` that no receipt covers, oldest first."""
        folder = corpus_dir(self.home)
        if not folder.is_dir():
            return []
        names = sorted(
            folder.glob("*.seg-*.txt"), key=lambda path: (path.stat().st_mtime, path.name)
        )
        return [p.name for p in names if not manifests.receipt_path(self.home, p.name).exists()]

    def republish(self) -> int:
        """Publish every receipt its manifest lacks (a publish that failed); how many."""
        folder = corpus_dir(self.home) / manifests.RECEIPTS_DIR
        done = 0
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            receipt = manifests.read_receipt(self.home, path.name.removesuffix(".json") + ".txt")
            if receipt is not None and receipt.outcome == "inserted":
                with contextlib.suppress(OSError, TetherError):
                    done += manifests.publish(self.home, receipt)
        return done

    def _gate(self, session: str, name: str, lane: str) -> str | None:
        if lane == "ingest":
            return None
        try:
            retired = {b.segment for b in ledger(self.home, session) if b.retired}
        except TetherError:
            retired = set()
        if name in retired:
            return "extraction_disabled"
        try:
            on = self.writeback()
        except TetherError:
            return "extraction_disabled"  # held: neither extracted nor retired
        if on is False:
            held = {b.hash for b in ledger(self.home, session) if b.segment == name}
            retire(self.home, session, frozenset(held))
            return "extraction_disabled"
        return None

    # -- one segment -----------------------------------------------------------------

    async def harvest(self, name: str, *, lane: str) -> Harvested:
        session, hash24 = parse_segment_link(name.removesuffix(".txt"))
        name = f"{session}.seg-{hash24}.txt"
        out = Harvested("inserted", name, lane)
        receipt = manifests.read_receipt(self.home, name)
        if receipt is not None and not self._redo(receipt, lane):
            if receipt.segment not in manifests.published(self.home, session):
                manifests.publish(self.home, receipt)
            out.outcome = "already_ingested"
            return out
        gated = self._gate(session, name, lane)
        if gated is not None:
            out.outcome = gated
            return out
        claim_path = manifests.receipt_path(self.home, name).with_suffix(".claim")
        with claim(claim_path) as held:
            if held is None:
                out.outcome = "claimed_elsewhere"
                return out
            await self._extract(session, name, hash24, out)
        return out

    def _model_runs(self) -> bool:
        return self.extractor is not None and self.mode != "extractive"

    def _redo(self, receipt: manifests.Receipt, lane: str) -> bool:
        """Whether the owner's explicit lane may extract a segment a receipt covers: one
        that gave nothing, or one only the extractive path read while a model runs now."""
        if lane != "ingest":
            return False
        return receipt.outcome == "empty" or (receipt.path == "extractive" and self._model_runs())

    async def _extract(self, session: str, name: str, hash24: str, out: Harvested) -> None:
        text = read_segment(self.home, name)
        progress_path = manifests.receipt_path(self.home, name).with_suffix(".progress")
        progress = _read_progress(progress_path)
        runs = chunks(segment_turns(session, text), self.chunk_chars)
        out.chunks = len(runs)
        use_model = self._model_runs()
        retry = set(progress.failed)
        progress.failed = []
        progress.cause = progress.detail = progress.error = None  # this pass says its own
        segment = name.removesuffix(".txt")
        for i, run in enumerate(runs):
            if i < progress.chunks_done and i not in retry:
                continue
            facts: list[ExtractedFact] = []
            failed = False
            if use_model:
                failed = await self._model_chunk(session, segment, run, progress, facts)
                if failed:
                    progress.failed.append(i)
            if i not in retry and (not use_model or failed or self.mode == "both"):
                found = statements(run, cap=CAP, segment=segment)
                progress.extractive += len(found)
                facts[:0] = found  # the owner's own words first: a slot keeps its first
            for found_fact in facts:
                fact = msgspec.structs.replace(found_fact, text=redact(found_fact.text).text)
                if self._bank_fact(fact, session, name, out.lane):
                    progress.inserted += 1
                else:
                    progress.duplicate += 1
                progress.facts.append(fact.text)
                progress.links.extend(_LINK.findall(fact.text))
            progress.chunks_done = max(progress.chunks_done, i + 1)
            _write_progress(progress_path, progress)
            crash_point(CRASH_AFTER_CHUNK)
        out.model_calls, out.model_failed = progress.model_calls, progress.model_failed
        out.extractive, out.path = progress.extractive, _path(progress, use_model)
        out.cause, out.detail = progress.cause, progress.detail
        out.inserted, out.duplicate = progress.inserted, progress.duplicate
        out.facts = list(dict.fromkeys(progress.facts))
        if progress.failed:
            # The model failed on some chunks: no receipt, so a later pass retries them
            # (the extractive path's facts are in already; its progress says so).
            out.outcome = "fallback" if progress.inserted + progress.duplicate else "failed"
            out.error = progress.error
            return
        if not use_model and out.cause is None:
            out.cause = self.absent
        self._receipt(session, name, hash24, progress, out, use_model=use_model)
        progress_path.unlink(missing_ok=True)

    def _receipt(
        self,
        session: str,
        name: str,
        hash24: str,
        progress: _Progress,
        out: Harvested,
        *,
        use_model: bool,
    ) -> None:
        """Write the segment's receipt and publish it into the session's manifest."""
        links = [LINK_PREFIX + name.removesuffix(".txt"), *dict.fromkeys(progress.links)]
        verified = tuple(link for link in links if self._resolves(link))
        receipt = manifests.Receipt(
            segment=name,
            session=session,
            hash=hash24,
            lane=out.lane,
            outcome="inserted" if progress.inserted + progress.duplicate else "empty",
            time=self.now(),
            inserted=progress.inserted,
            duplicate=progress.duplicate,
            links=verified,
            facts=tuple(dict.fromkeys(progress.facts)),
            path=out.path,
            model_calls=progress.model_calls,
            cause=None if use_model else out.cause,
        )
        manifests.write_receipt(self.home, receipt)
        out.outcome = receipt.outcome
        out.links = len(verified)
        try:
            manifests.publish(self.home, receipt)
        except (OSError, TetherError):
            out.outcome = "manifest_failed"

    async def _model_chunk(
        self,
        session: str,
        segment: str,
        run: list[SourceTurn],
        progress: _Progress,
        facts: list[ExtractedFact],
    ) -> bool:
        """One model call over ``run``; its facts into ``facts``. True when it failed
        (the cause, with a trimmed excerpt of a malformed reply, goes in ``progress``)."""
        assert self.extractor is not None
        request = ExtractionRequest(
            instructions=INSTRUCTIONS,
            source=render_turns(run),
            sessions=(session,),
            turns=tuple(run),
            segment=segment,
            cap=CAP,
        )
        try:
            extraction = await self.extractor.extract(request)
        except TetherError as exc:  # the model's failures, the budget's refusal
            progress.model_failed += 1
            if progress.cause is None:
                progress.cause, progress.detail = model_cause(exc)
                progress.error = type(exc).__name__
            return True
        progress.model_calls += 1
        progress.model_facts += len(extraction.facts)
        facts.extend(extraction.facts)
        return False

    def _resolves(self, link: str) -> bool:
        """A page read of ``link``: a banked segment, or a page of the store."""
        if link.startswith(LINK_PREFIX):
            try:
                read_segment(self.home, link)
            except (NotFoundError, TetherError):
                return False
            return True
        return self.page_exists(link.removeprefix("tether://"))

    def _bank_fact(self, fact: ExtractedFact, session: str, segment: str, lane: str) -> bool:
        """Put ``fact`` in its slot; False when the slot already holds it (or stronger)."""
        authority: FactAuthority = fact.authority if RANK[fact.authority] <= RANK[CAP] else CAP
        p = fact.provenance
        refs = json.dumps(
            [
                {
                    "lane": lane,
                    "session": session,
                    "segment": segment.removesuffix(".txt"),
                    "first_turn": p.first_turn,
                    "last_turn": p.last_turn,
                }
            ],
            separators=(",", ":"),
        )
        now = self.now()
        with self.sweep.transaction() as tx:
            held = tx.fact_in_slot(OWNER, fact.subject, fact.entity)
            if held is not None:
                if _norm(held.text) == _norm(fact.text):
                    return False
                if RANK.get(held.authority, 0) >= RANK[authority]:
                    return False
                tx.put_fact(msgspec.structs.replace(held, active=False, updated_at=now))
            tx.put_fact(
                Fact(
                    owner=OWNER,
                    subject=fact.subject,
                    entity=fact.entity,
                    text=fact.text,
                    authority=authority,
                    refs=refs,
                    origin_receipt=f"checkpoint:{segment.removesuffix('.txt')}",
                    created_at=now,
                    updated_at=now,
                )
            )
        return True


def _read_progress(path: Path) -> _Progress:
    try:
        return msgspec.json.decode(path.read_bytes(), type=_Progress)
    except (FileNotFoundError, msgspec.DecodeError):
        return _Progress()


def _write_progress(path: Path, progress: _Progress) -> None:
    write_atomic(path, msgspec.json.encode(progress))
