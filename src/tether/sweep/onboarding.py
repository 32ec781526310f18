"""The ``onboarding_cold_start`` channel: the owner's first sessions, read whole.

The runtime marks an owner's first few sessions itself when it first indexes them
(``Store.track_sessions``; never a client flag). Each run reserves a bounded page of them
(``PAGE`` sessions an owner) before the daily channel's days, so a backlog of days never
starves a new owner's first impressions; and the channel has its own cursor: a marked
session is done once the source receipt of its packet commits (``onboarding.<session>``,
after every candidate receipt of it), whatever the daily cursor says.

Per session, at most once as the daily pass: the bounded transcript (owner and assistant
turns, ``CHARS``) goes through the same extractor in one constrained call on the
background slot, after the same cost gate; the page is staged at
``<home>/sweep/stage/<owner>/onboarding-<session>.json`` before anything applies, and a
retry reads it. The packet's window is the local day the session began.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.config import SweepConfig
from tether.core.context import tokens
from tether.core.learning.extraction import ExtractionError, render_turns
from tether.core.sweep.packet import MAX_CANONICAL_WRITES, DailySweepInput, FactCandidate
from tether.core.sweep.packet import SourceRef as Ref
from tether.core.sweep.state import Owner, receipt_id
from tether.core.sweep.windows import Window, local_today, window_for
from tether.errors import LlmError, TetherError
from tether.extract.extractor import Extractor
from tether.faults import crash_point
from tether.ports import SweepDayStore, SweepStore
from tether.records import ExtractionRequest
from tether.scan import packets
from tether.sweep import spine
from tether.sweep.model import Call
from tether.sweep.owners import DEFAULT_OWNER
from tether.sweep.producer import empty_packet

PAGE = 2
CHARS = 8_000
PAGE_REPLY_TOKENS = 2048
PROMPT = (
    "These are among the owner's first conversations with you. Write what is worth "
    "remembering about the owner from it: who they are, what they work on, their "
    "preferences and plans, each with its slot, the session it came from and, when you "
    "can, the turn range and the owner's exact words quoted. Nothing transient."
)


def source_key(session: str) -> str:
    key = f"onboarding.{session}"
    return (
        key if len(key) <= 64 else "onboarding." + hashlib.sha256(session.encode()).hexdigest()[:40]
    )


class Item(msgspec.Struct, frozen=True):
    """One marked session due now, and the window of the day it began."""

    session: str
    window: Window


class OnboardingProducer:
    def __init__(
        self,
        *,
        home: Path,
        store: SweepDayStore,
        call: Call,
        extractor: Extractor,
        config: SweepConfig,
        allow: frozenset[str] = frozenset(),
    ) -> None:
        self.home = home
        self.store = store
        self.call = call
        self.extractor = extractor
        self.config = config
        self.allow = allow
        self.requests = 0

    def page(self, owner: Owner, sweep: SweepStore, now: datetime) -> list[Item]:
        """The owner's marked sessions not consumed yet, settled (no turn in flight, not
        discarded, begun before today), oldest first, at most ``PAGE``."""
        if owner.id != DEFAULT_OWNER:
            return []  # the runtime marks the home owner's sessions only
        today = local_today(owner.timezone_name, now)
        marked = sorted(
            (m for m in self.store.sessions_meta().values() if m.onboarding and m.owner is None),
            key=lambda meta: (meta.first_seen or now, meta.session),
        )
        out: list[Item] = []
        for m in marked:
            if m.discarded_at is not None or m.open_since is not None or m.first_seen is None:
                continue
            local = local_today(owner.timezone_name, m.first_seen)
            if local >= today:
                continue
            window = window_for(owner.timezone_name, local)
            if self._done(sweep, owner, m.session, window):
                continue
            out.append(Item(m.session, window))
            if len(out) == PAGE:
                break
        return out

    def _done(self, sweep: SweepStore, owner: Owner, session: str, window: Window) -> bool:
        rid = receipt_id(
            owner=owner.id,
            namespace=owner.receipt_namespace,
            local_date=window.local_date,
            kind="source",
            source_key=source_key(session),
            ordinal=0,
            account_generation=owner.account_generation,
            source_generation=owner.source_generation,
        )
        with sweep.transaction(write=False) as tx:
            got = tx.receipt(rid)
        return got is not None and got.state == "committed"

    def path(self, owner: str, session: str) -> Path:
        return self.home / "sweep" / "stage" / owner / f"onboarding-{session}.json"

    def produce(self, owner: Owner, item: Item) -> DailySweepInput | str:
        """The session's packet, or the reason code it is not ready."""
        path = self.path(owner.id, item.session)
        try:
            staged = msgspec.json.decode(path.read_bytes(), type=_Stage)
        except FileNotFoundError:
            staged = None
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return "stage_malformed"
        if staged is not None:
            return (
                staged.packet if staged.packet is not None else (staged.reason or "stage_missing")
            )
        rows = self.store.session_turns(item.session, 0, 1 << 62)
        turns = spine.source_turns(rows)
        text = render_turns(turns, cap=CHARS)
        bound = tokens.count(PROMPT) + tokens.count(text) + PAGE_REPLY_TOKENS + 16
        usd = bound * max(self.config.model_usd_per_mtok_in, self.config.model_usd_per_mtok_out)
        if bound > self.config.max_model_tokens or usd / 1e6 > self.config.max_model_cost_usd:
            return "cost_ceiling"
        invocation = uuid.uuid4().hex
        _write(path, _Stage(invocation=invocation))
        request = ExtractionRequest(
            instructions=PROMPT,
            source=text,
            sessions=(item.session,),
            turns=tuple(turns),
            max_memories=MAX_CANONICAL_WRITES,
        )
        try:
            completion = self.call(self.extractor.completion_request(request))
            self.requests += 1
            page = self.extractor.read_page(completion.content, request)
        except (ExtractionError, LlmError, TetherError) as exc:
            reason = (
                "model_output_malformed" if isinstance(exc, ExtractionError) else "model_failed"
            )
            _write(path, _Stage(invocation=invocation, reason=reason))
            return reason
        key = source_key(item.session)
        candidates = tuple(
            FactCandidate(
                source_key=key,
                subject=f.subject,
                entity=f.entity,
                text=f.text,
                authority=f.authority,
                refs=(Ref(kind="session", session=item.session),),
            )
            for f in page.facts
        )
        packet = msgspec.structs.replace(
            empty_packet(owner, item.window), candidates=candidates, sources=(key,)
        )
        packet, _ = packets.redact_packet(packet, self.allow)
        _write(path, _Stage(invocation=invocation, packet=packet))
        crash_point("onboarding-after-stage")
        return packet


class _Stage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    schema: str = "tether_sweep_onboarding_stage.v1"
    invocation: str
    reason: str | None = None
    packet: DailySweepInput | None = None


def _write(path: Path, stage: _Stage) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    files.write_atomic(path, msgspec.json.encode(stage), mode=0o600)
