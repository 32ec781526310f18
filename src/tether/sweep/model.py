"""The completed-day producer: one two-phase model pass over a day's spine, at most once.

For an owner's completed day with no packet staged by a backend (``StagingPacketReader``
first) and no stage of its own (``sweep.stage``, behind the ``ModelStages`` port: the
home's files, or the store's table for a sweep worker):

1. read the day's rows from the store (``sweep.spine``); none: the complete-zero packet;
2. the cost gate (``core.sweep.cost``): the ceiling of every digest still to make and of
   both phases must fit ``[sweep] max_model_tokens`` and ``max_model_cost_usd``, or the
   day stays incomplete (``cost_ceiling``) and no request is made;
3. the session-day digests still missing, each stored once it is made;
4. stage ``invoked`` (the invocation id; the day's one durable write; a runner that finds
   the day marked first takes what that runner's invocation says), then phase A (the
   spine; the model asks for at most 8 raw excerpts, turn ranges of the day's sessions,
   served redacted from the store at ``[sweep] excerpt_chars`` each) and phase B (the
   candidate page through the shared extractor: memories with provenance and earned
   authority, folders for unfiled sessions), both JSON-schema constrained on the
   background slot;
5. stage ``staged`` (the redacted page and its digest, recorded with the stage) before
   anything applies; then the folders (best-effort, never over one the owner set) and
   the packet to the runner.

A retry reads the stage and never calls the model for that day while its invocation may
still run: a mark whose lease ran out and whose holder is gone is taken over by one new
invocation (``sweep.stage``, ``sweep.holder``). Calls go through
``call``, which the composition root builds over the background slot's gate and the
budget gate.

``[extract]`` changes the pass (``sweep.learned``): with the short form (small models)
phases A and B are replaced by one call per run of a session's turns; with mode
``both`` the owner's own statements (``core.learning.statements``) are merged in first, and a
failed model pass no longer leaves the day incomplete: the page is theirs alone and the
stage's counts say ``model_failed_<reason>``; with mode ``extractive`` no call is made.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from tether.config import SweepConfig
from tether.core.learning.extraction import ExtractionError, Form, render_turns
from tether.core.sweep import cost
from tether.core.sweep.packet import (
    MAX_CANONICAL_WRITES,
    MAX_REFS,
    DailySweepInput,
    FactCandidate,
    Incomplete,
    SourceRef,
)
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import Window
from tether.errors import ExtraMissingError, LlmError, LlmUnreachableError, StoreError, TetherError
from tether.extract.calls import failure_reason
from tether.extract.extractor import Extractor
from tether.faults import crash_point, pause_point
from tether.ports import ModelStages, Producer, SweepDayStore
from tether.records import (
    ChatMessage,
    Completion,
    CompletionRequest,
    Extraction,
    ExtractionRequest,
    FolderAssignment,
    SessionDigest,
    SessionMeta,
    SourceTurn,
)
from tether.scan import packets
from tether.scan.secrets import redact
from tether.sweep import spine, stage
from tether.sweep.learned import extractive_page, list_pass, merge, said
from tether.sweep.producer import empty_packet

log = logging.getLogger("tether.sweep")

#: A model call, made synchronously (the composition root bridges to the event loop).
Call = Callable[[CompletionRequest], Completion]

MAX_EXCERPTS = 8
#: A requested excerpt spans at most this many turns.
EXCERPT_TURNS = 16
PHASE_A_REPLY_TOKENS = 512
PAGE_REPLY_TOKENS = 2048
#: Which paths a day's page comes from (``[extract] mode``, resolved).
ExtractMode = Literal["model", "extractive", "both"]

PHASE_A = (
    "You read the owner's day: one block per conversation, headed by its session id, "
    "with summaries and digests that cite turn numbers. Before you write the day's "
    "memories you may ask to read at most 8 raw excerpts (a turn range of one session) "
    "to check exact wording. Ask only for what you need; an empty list is fine."
)
PHASE_B = (
    "Write the owner's memory page for this day. Each memory: one durable fact worth "
    "knowing tomorrow (a decision, a preference, a plan, a fact about the owner), its "
    "slot (subject: whose it is, e.g. owner; entity: what it is about, e.g. book-club), "
    "the session ids it came from and, when the owner or the agent said it in a turn you "
    "read, the turn range and the exact words quoted. Nothing transient, nothing you "
    "were not told. Also give a short folder name for each unfiled session listed."
)


def excerpt_schema(sessions: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "excerpts": {
                "type": "array",
                "maxItems": MAX_EXCERPTS,
                "items": {
                    "type": "object",
                    "properties": {
                        "session": {"type": "string", "enum": sorted(set(sessions))},
                        "first_turn": {"type": "integer", "minimum": 0},
                        "last_turn": {"type": "integer", "minimum": 0},
                        "reason": {"type": "string"},
                    },
                    "required": ["session", "first_turn", "last_turn"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["excerpts"],
        "additionalProperties": False,
    }


def excerpt_ranges(value: object, sessions: Sequence[str]) -> list[tuple[str, int, int]]:
    """Phase A's requests, clamped: known sessions, sane ranges, at most 8, each once."""
    items = value.get("excerpts") if isinstance(value, dict) else None
    out: dict[tuple[str, int, int], None] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        s, a, b = item.get("session"), item.get("first_turn"), item.get("last_turn")
        if s not in sessions or not isinstance(a, int) or not isinstance(b, int):
            continue
        a, b = sorted((max(a, 0), max(b, 0)))
        out[(str(s), a, min(b, a + EXCERPT_TURNS - 1))] = None
        if len(out) == MAX_EXCERPTS:
            break
    return list(out)


class ModelProducer:
    def __init__(
        self,
        *,
        stages: ModelStages,
        store: SweepDayStore,
        call: Call,
        extractor: Extractor,
        config: SweepConfig,
        clock: Callable[[], datetime],
        allow: frozenset[str] = frozenset(),
        staged: Producer | None = None,
        lease: timedelta = stage.DEFAULT_LEASE,
        mode: ExtractMode = "model",
        form: Form = "page",
        chunk_chars: int = 1500,
    ) -> None:
        self.stages = stages
        self.store = store
        self.call = call
        self.extractor = extractor
        self.config = config
        self.clock = clock
        self.allow = allow
        self.staged = staged
        self.lease = lease  # an ``invoked`` mark's, renewed before each request
        self.mode: ExtractMode = mode
        self.form: Form = form
        self.chunk_chars = chunk_chars
        #: What the last invocations made, by kind (tests, the benchmark): requests sent.
        self.requests: Counter[str] = Counter()

    # -- the Producer port ----------------------------------------------------------------

    def produce(self, owner: Owner, window: Window) -> DailySweepInput | Incomplete:
        if self.staged is not None:
            got = self.staged.produce(owner, window)
            if not (isinstance(got, Incomplete) and got.reason == "stage_missing"):
                return got  # a backend-staged packet (or its problem) decides the day
        return self._from_read(owner, window, invoke=True)

    def _from_read(
        self, owner: Owner, window: Window, *, invoke: bool
    ) -> DailySweepInput | Incomplete:
        read = stage.read(self.stages, owner.id, window, owner.source_generation)
        if read.kind == "older":
            return empty_packet(owner, window)  # that deployment owned the invocation
        if read.kind == "bad":
            return Incomplete("stage_malformed")
        if read.stage is not None and read.stage.state == "invoked":
            held = stage.held(self.stages, read.stage)
            if held != "expired" or not invoke:
                return Incomplete(_HELD.get(held, "stage_missing"))
            # Its lease ran out and its holder is gone: a new invocation takes it over.
        elif read.stage is not None:
            return self._from_stage(read.stage)
        if not invoke:
            return Incomplete("stage_missing")
        return self._invoke(owner, window)

    def _from_stage(self, staged: stage.StageFile) -> DailySweepInput | Incomplete:
        if staged.state == "failed" or staged.packet is None:
            return Incomplete(staged.reason or "stage_missing")
        self._file(staged.folders)
        return staged.packet

    # -- one invocation ---------------------------------------------------------------------

    def _invoke(self, owner: Owner, window: Window) -> DailySweepInput | Incomplete:
        day = spine.with_digests(spine.read_day(self.store, owner.id, window), self.store, window)
        if not day.rows:
            return empty_packet(owner, window)
        counts: Counter[str] = Counter(day.excluded)
        model = self.mode != "extractive"
        todo = [r for r in day.rows if r.needs_digest] if self.form == "page" else []
        if model and not self._fits(day, todo):
            log.info(
                "sweep owner=%s date=%s model pass over the ceiling (cost_ceiling)",
                owner.id,
                window.local_date,
            )
            if self.mode == "model":
                return Incomplete("cost_ceiling")
            model, counts["model_skipped_cost_ceiling"] = False, 1
        if model and todo:
            try:
                day = self._digests(day, todo, window)
            except LlmError as exc:
                if self.mode == "model":
                    return Incomplete("digest_failed")  # no invocation yet: a later run may retry
                model, counts[f"model_failed_{_failure(exc)}"] = False, 1
        base = stage.StageFile(
            schema=stage.STAGE_SCHEMA,
            state="invoked",
            invocation=uuid.uuid4().hex,
            owner=owner.id,
            local_date=window.local_date,
            window_id=window.window_id,
            source_generation=owner.source_generation,
        )
        if not stage.mark(self.stages, base, self.lease):
            # Another runner marked the day first: its invocation, never a second one.
            return self._from_read(owner, window, invoke=False)
        crash_point("sweep-after-invoked")
        pause_point("sweep-after-invoked")
        counts["digests"] = len(todo) if model else 0
        usage: list[tuple[int, int, int]] = []
        page: Extraction | None = None
        if model:
            call = self._renewing(base)
            try:
                if self.form == "list":
                    page = list_pass(
                        call,
                        self.extractor,
                        day,
                        chunk_chars=self.chunk_chars,
                        counts=counts,
                        usage=usage,
                    )
                    self.requests["list"] += len(usage)
                else:
                    page = self._phases(day, counts, usage, call)
            except StoreError:
                raise  # the store failed, not the model: the mark stays, taken over after its lease
            except (ExtractionError, LlmError, TetherError) as exc:
                reason = _failure(exc)
                log.warning(
                    "sweep owner=%s date=%s model pass failed (%s): %s",
                    owner.id,
                    window.local_date,
                    reason,
                    said(exc),
                )
                if self.mode == "model":
                    return self._failed(base, exc, reason=reason, counts=counts, usage=usage)
                counts[f"model_failed_{reason}"] += 1
        if self.mode != "model":
            found = extractive_page(day)
            counts["extractive"] = len(found.facts)
            page = merge(found, page)
        assert page is not None
        packet, folders = self._packet(owner, window, day, page, counts)
        staged = stage.outcome(
            self.stages,
            msgspec.structs.replace(
                base,
                state="staged",
                packet=packet,
                folders=folders,
                counts=dict(sorted(counts.items())),
                usage=tuple(usage),
                digest=stage.page_digest(packet, folders),
            ),
        )
        if not staged:
            return Incomplete("invocation_taken_over")  # its page is not ours to apply
        crash_point("sweep-after-stage")
        self._file(folders)
        log.info(
            "sweep owner=%s date=%s staged: %s",
            owner.id,
            window.local_date,
            " ".join(f"{k}={v}" for k, v in sorted(counts.items())),
        )
        return packet

    def _failed(
        self,
        base: stage.StageFile,
        exc: BaseException,
        *,
        reason: str,
        counts: Counter[str],
        usage: list[tuple[int, int, int]],
    ) -> Incomplete:
        """``[extract] mode = "model"``: a failed pass leaves the day incomplete."""
        if not usage and _unsent(exc):
            stage.drop(self.stages, base)
            return Incomplete(reason)  # nothing reached the model: a later run may try
        stage.outcome(
            self.stages,
            msgspec.structs.replace(
                base, state="failed", reason=reason, counts=dict(counts), usage=tuple(usage)
            ),
        )
        return Incomplete(reason)

    def _shape(self, day: spine.Day, todo: Sequence[spine.DayRow]) -> cost.PassShape:
        known = len(spine.spine(day, self.config.spine_chars))
        bound = known + sum(4 * spine.DIGEST_REPLY_TOKENS for _ in todo)
        return cost.PassShape(
            digest_inputs=tuple(r.raw for r in todo),
            digest_prompt=spine.DIGEST_PROMPT,
            digest_reply_tokens=spine.DIGEST_REPLY_TOKENS,
            spine_chars=min(bound, self.config.spine_chars),
            phase_a_prompt=PHASE_A,
            phase_a_reply_tokens=PHASE_A_REPLY_TOKENS,
            phase_b_prompt=PHASE_B,
            excerpts=MAX_EXCERPTS,
            excerpt_chars=self.config.excerpt_chars,
            page_reply_tokens=PAGE_REPLY_TOKENS,
        )

    def _fits(self, day: spine.Day, todo: Sequence[spine.DayRow]) -> bool:
        c = cost.ceiling(
            self._shape(day, todo),
            usd_per_mtok_in=self.config.model_usd_per_mtok_in,
            usd_per_mtok_out=self.config.model_usd_per_mtok_out,
        )
        return cost.fits(
            c, max_tokens=self.config.max_model_tokens, max_usd=self.config.max_model_cost_usd
        )

    def _digests(self, day: spine.Day, todo: Sequence[spine.DayRow], window: Window) -> spine.Day:
        for row in todo:
            request = CompletionRequest(
                messages=(
                    ChatMessage(role="system", content=spine.DIGEST_PROMPT),
                    ChatMessage(role="user", content=row.raw),
                ),
                slot=self.extractor.slot,
                max_tokens=spine.DIGEST_REPLY_TOKENS,
                temperature=self.extractor.temperature,
            )
            completion = self.call(request)
            self.requests["digest"] += 1
            text = redact(completion.content.strip(), allow=self.allow).text[:4000]
            self.store.put_session_digest(
                SessionDigest(
                    session=row.session,
                    window_id=window.window_id,
                    content_hash=row.content_hash,
                    text=text,
                    time=self.clock(),
                )
            )
        return spine.with_digests(day, self.store, window)

    def _renewing(self, base: stage.StageFile) -> Call:
        """``call``, the mark's lease renewed before each request (refused once the day
        was taken over: SweepFencedError)."""

        def call(request: CompletionRequest) -> Completion:
            stage.renew(self.stages, base, self.lease)
            return self.call(request)

        return call

    def _phases(
        self,
        day: spine.Day,
        counts: Counter[str],
        usage: list[tuple[int, int, int]],
        call: Call,
    ) -> Extraction:
        text = spine.spine(day, self.config.spine_chars)
        sessions = day.sessions
        a_messages = (
            ChatMessage(role="system", content=PHASE_A),
            ChatMessage(role="user", content=text),
        )
        a_request = self.extractor.json_request(
            a_messages, excerpt_schema(sessions), max_tokens=PHASE_A_REPLY_TOKENS
        )
        a = call(a_request)
        self.requests["phase_a"] += 1
        usage.append((a.cache_n, a.prompt_n, a.predicted_n))
        try:
            asked = excerpt_ranges(msgspec.json.decode(a.content.strip() or "null"), sessions)
        except msgspec.DecodeError:
            counts["phase_a_malformed"] += 1
            asked = []
        turns: list[SourceTurn] = []
        excerpts: list[str] = []
        for s, first, last in asked:
            got = spine.source_turns(self.store.session_turns(s, first, last))
            turns.extend(got)
            excerpts.append(render_turns(got, cap=self.config.excerpt_chars))
        counts["excerpts"] = len(asked)
        unfiled = tuple(r.session for r in day.rows if r.folder is None)
        served = "\n\n".join(excerpts) if excerpts else "(no excerpts)"
        request = ExtractionRequest(
            instructions=PHASE_B,
            source=text,
            sessions=sessions,
            prelude=(
                ChatMessage(role="assistant", content=a.content[: 4 * PHASE_A_REPLY_TOKENS]),
                ChatMessage(
                    role="user",
                    content=f"The excerpts you asked for:\n{served}\n\nUnfiled sessions: "
                    f"{', '.join(unfiled) or '(none)'}. Now the page.",
                ),
            ),
            turns=tuple(turns),
            folder_sessions=unfiled,
            max_memories=MAX_CANONICAL_WRITES,
        )
        b_request = msgspec.structs.replace(
            self.extractor.completion_request(request), max_tokens=PAGE_REPLY_TOKENS
        )
        b = call(b_request)
        self.requests["phase_b"] += 1
        usage.append((b.cache_n, b.prompt_n, b.predicted_n))
        return self.extractor.read_page(b.content, request, self._reader)

    def _reader(self, session: str, first: int, last: int) -> list[SourceTurn]:
        return spine.source_turns(self.store.session_turns(session, first, last))

    def _packet(
        self,
        owner: Owner,
        window: Window,
        day: spine.Day,
        page: Extraction,
        counts: Counter[str],
    ) -> tuple[DailySweepInput, tuple[FolderAssignment, ...]]:
        counts["dropped_provenance"] += page.dropped_provenance
        counts["dropped_invalid"] += page.dropped_invalid
        counts["folders_dropped"] += page.folders_dropped
        candidates = []
        for f in page.facts:
            p = f.provenance
            refs = [SourceRef(kind="session", session=s) for s in p.sessions]
            if p.quote_session is not None and p.quote_turn is not None:
                refs.insert(0, SourceRef(kind="turn", session=p.quote_session, turn=p.quote_turn))
            candidates.append(
                FactCandidate(
                    source_key=p.sessions[0],
                    subject=f.subject,
                    entity=f.entity,
                    text=f.text,
                    authority=f.authority,
                    refs=tuple(refs[:MAX_REFS]),
                )
            )
            counts[f"authority_{f.authority}"] += 1
        packet = msgspec.structs.replace(
            empty_packet(owner, window), candidates=tuple(candidates), sources=day.sessions
        )
        packet, counts["redacted"] = packets.redact_packet(packet, self.allow)
        folders = tuple(
            msgspec.structs.replace(a, folder=redact(a.folder, allow=self.allow).text)
            for a in page.folders
        )
        return packet, folders

    def _file(self, folders: Sequence[FolderAssignment]) -> None:
        """Best-effort and idempotent: a session the owner (or an earlier run) filed keeps
        its folder; a folder that cannot be written never fails the day."""
        for a in folders:
            try:
                meta = self.store.session_meta(a.session)
                if meta is not None and meta.folder is not None:
                    continue
                base = meta or SessionMeta(session=a.session)
                self.store.put_session_meta(
                    msgspec.structs.replace(base, folder=a.folder, folder_by="sweep")
                )
            except TetherError as exc:
                log.warning("sweep folder for session %s not set: %s", a.session, exc)


#: What a day whose mark another run holds reports (``sweep.holder``).
_HELD = {"live": "invocation_busy", "stalled": "invocation_stalled"}


def _unsent(exc: BaseException) -> bool:
    """The first call failed before the model saw it (refused, or no connection)."""
    reason = getattr(exc, "reason", None)
    return isinstance(exc, LlmUnreachableError) or (
        isinstance(reason, str) and reason.startswith("budget_")
    )


def _failure(exc: BaseException) -> str:
    """The reason code a failed model pass leaves: ``model_output_malformed``,
    ``model_timeout``, ``context_full``, ``model_unreachable``, ``model_absent``, a
    ``budget_*`` refusal, else ``model_failed``."""
    if isinstance(exc, ExtractionError):
        return "model_output_malformed"
    if isinstance(exc, ExtraMissingError):
        return "model_absent"
    return failure_reason(exc)
