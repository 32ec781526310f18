"""The budget gate: every background model call reserves its bound before it is sent and
settles with the server's usage after, against ``[budget]``.

The decision is ``core.spend.budget_rules.decide``; this wraps it around the store's spend ledger
(``Store.budget_reserve``, one transaction: read the day, decide, record) so a restart
keeps the day's spend and two calls at once cannot both slip under a cap. "Today" is the
owner's local day (``zone``, chosen by the composition root). A refusal raises
``BudgetRefusedError`` with its reason code, after writing a ``refused`` ledger row, one
content-free line to ``<home>/telemetry/budget.jsonl`` and (once per kind, reason and
day) a log line: the caller skips its job, never silently.

Live turns are weighed only when ``[budget] live_day_tokens`` is set (and then never
against ``day_usd``); otherwise the gate costs them nothing.

One write per call: a settle is not written when the call ends but kept, and written in
the transaction of the gate's next reservation (before that reservation reads the day), so
a call costs the ledger one write transaction, not two. What is kept is written by
``flush`` too: when whoever owns the gate closes it, and by the daemon's scheduler once a
settle has waited ``FLUSH_AFTER_S``. Until then the ledger shows the call ``reserved`` at its
bound, which is never less than it may use (the gate is conservative while it lags), and a
process killed meanwhile leaves it so for the day: spend is over-counted, never under.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path

import msgspec

from tether.config import BudgetConfig
from tether.core.spend import budget_rules as rules
from tether.core.spend.budget_rules import Bound, Caps, Prices
from tether.errors import TetherError, UnsafeHomePathError
from tether.files import append_home
from tether.ports import Clock, SpendLedger
from tether.records import (
    BudgetReason,
    Completion,
    CompletionRequest,
    SpendKind,
    SpendRow,
    SpendSettle,
)

log = logging.getLogger("tether.budget")
TELEMETRY_FILE = Path("telemetry") / "budget.jsonl"
RUNBOOK = "budget-exceeded"
#: How long a finished call's settle may wait for the next reservation before the
#: scheduler writes it by itself (``BudgetGate.flush_stale``).
FLUSH_AFTER_S = 30.0


class BudgetRefusedError(TetherError):
    """A model call the budget gate refused; nothing was sent (kind, reason code)."""

    runbook = RUNBOOK

    def __init__(self, kind: SpendKind, reason: BudgetReason, bound: int, day: str) -> None:
        super().__init__(
            f"{kind} call refused by [budget] ({reason}): {_why(kind, reason, bound, day)}"
        )
        self.kind = kind
        self.reason = reason
        self.bound = bound
        self.day = day


def _why(kind: SpendKind, reason: BudgetReason, bound: int, day: str) -> str:
    if reason == "budget_call":
        return f"one request may use {bound} tokens, more than [budget.{kind}] call_tokens"
    cap = (
        "[budget] day_usd"
        if reason == "budget_usd"
        else ("[budget] live_day_tokens" if kind == "live" else f"[budget.{kind}] day_tokens")
    )
    return f"up to {bound} more tokens would pass {cap} for {day}"


@dataclass(frozen=True)
class Reservation:
    """A call let through. ``id`` is its ledger row, or None for a call the gate does not
    record (a live turn with no live cap)."""

    id: int | None
    kind: SpendKind


class BudgetGate:
    def __init__(
        self,
        *,
        config: BudgetConfig,
        store: SpendLedger,
        clock: Clock,
        zone: tzinfo,
        telemetry: Path | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.zone = zone
        self.telemetry = telemetry
        self.prices = Prices(
            usd_per_mtok_in=config.usd_per_mtok_in,
            usd_per_mtok_out=config.usd_per_mtok_out,
            usd_per_mtok_cached=config.usd_per_mtok_cached,
        )
        #: (kind, reason, day) already logged, so a beat a second over budget logs once.
        self._logged: set[tuple[str, str, str]] = set()
        #: Settles not written yet (see the module docstring), and since when; calls end
        #: on worker threads, so both are behind a lock.
        self._pending: list[SpendSettle] = []
        self._pending_since: float | None = None  # time.monotonic(): not the owner's clock
        self._lock = threading.Lock()

    def caps(self, kind: SpendKind) -> Caps | None:
        """The caps of ``kind``; None when its calls are not recorded at all."""
        if kind == "live":
            day = self.config.live_day_tokens
            return None if day is None else Caps(day_tokens=day)
        own = self.config.kind(kind)
        return Caps(
            call_tokens=own.call_tokens, day_tokens=own.day_tokens, day_usd=self.config.day_usd
        )

    def gated(self, kind: SpendKind) -> bool:
        return self.caps(kind) is not None

    def today(self) -> str:
        return rules.local_day(self.zone, self.clock.now()).isoformat()

    @staticmethod
    def bound(request: CompletionRequest, default_max_tokens: int) -> Bound:
        max_tokens = request.max_tokens if request.max_tokens is not None else default_max_tokens
        return Bound(rules.prompt_tokens(request.messages, request.tools), max_tokens)

    def reserve(self, kind: SpendKind, session: str, bound: Bound) -> Reservation:
        """Reserve ``bound`` for one call of ``kind`` or raise BudgetRefusedError."""
        caps = self.caps(kind)
        if caps is None:
            return Reservation(None, kind)
        now = self.clock.now()
        day = rules.local_day(self.zone, now).isoformat()
        usd = rules.bound_usd(bound, self.prices) if kind != "live" else 0.0
        row = SpendRow(
            time=now,
            day=day,
            kind=kind,
            session=session,
            state="reserved",
            bound_tokens=bound.tokens,
            bound_usd=usd,
        )
        settles = self._take()
        try:
            stored = self.store.budget_reserve(
                row, lambda spent: rules.decide(caps, spent, bound, self.prices), settles
            )
        except BaseException:
            self._keep(settles)  # the transaction rolled back: they are still to write
            raise
        if stored.reason is None:
            return Reservation(stored.id, kind)
        self._refused(stored, stored.reason)
        raise BudgetRefusedError(kind, stored.reason, bound.tokens, day)

    def settle(self, reservation: Reservation, completion: Completion | None) -> None:
        """The call is over: count what it used (nothing, when it failed)."""
        if reservation.id is None:
            return
        if completion is None:
            self._keep([SpendSettle(id=reservation.id, tokens=0, usd=0.0)])
            return
        c, p, g = completion.cache_n, completion.prompt_n, completion.predicted_n
        usd = rules.usage_usd(c, p, g, self.prices) if reservation.kind != "live" else 0.0
        settle = SpendSettle(
            id=reservation.id,
            tokens=rules.usage_tokens(c, p, g),
            usd=usd,
            cache_n=c,
            prompt_n=p,
            predicted_n=g,
        )
        self._keep([settle])

    def flush(self) -> None:
        """Write every settle still kept (one transaction). Whoever owns the gate calls
        this before closing its store."""
        settles = self._take()
        try:
            self.store.budget_settle_all(settles)
        except BaseException:
            self._keep(settles)
            raise

    def flush_stale(self) -> None:
        """``flush`` if a settle has waited ``FLUSH_AFTER_S`` for the next reservation."""
        with self._lock:
            since = self._pending_since
        if since is not None and time.monotonic() - since >= FLUSH_AFTER_S:
            self.flush()

    def _keep(self, settles: list[SpendSettle]) -> None:
        if not settles:
            return
        with self._lock:
            self._pending.extend(settles)
            if self._pending_since is None:
                self._pending_since = time.monotonic()

    def _take(self) -> list[SpendSettle]:
        with self._lock:
            taken, self._pending, self._pending_since = self._pending, [], None
        return taken

    def _refused(self, row: SpendRow, reason: BudgetReason) -> None:
        key = (row.kind, reason, row.day)
        if key not in self._logged:
            self._logged.add(key)
            until = (
                "while its requests are this big"
                if reason == "budget_call"
                else f"for the rest of {row.day} or until spend frees up"
            )
            log.warning(
                "budget: %s calls refused (%s) %s (runbook: %s)", row.kind, reason, until, RUNBOOK
            )
        if self.telemetry is None:
            return
        line = {
            "time": row.time.isoformat(),
            "day": row.day,
            "kind": row.kind,
            "reason": reason,
            "bound_tokens": row.bound_tokens,
        }
        try:
            self.telemetry.parent.mkdir(parents=True, exist_ok=True)
            append_home(self.telemetry, msgspec.json.encode(line) + b"\n")
        except (
            OSError,
            UnsafeHomePathError,
        ) as exc:  # telemetry never stops the refusal from being reported
            log.warning("budget telemetry not written to %s: %s", self.telemetry, exc)


def hits(rows: list[SpendRow], day: str) -> dict[tuple[str, str], int]:
    """Refusals of local ``day`` by (kind, reason code): what ``tether doctor`` warns of."""
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.day == day and r.state == "refused" and r.reason:
            out[(r.kind, r.reason)] = out.get((r.kind, r.reason), 0) + 1
    return out
