"""Every extraction model call, counted: ``<home>/telemetry/model_calls.jsonl``.

``CallLog`` is handed to the metered call (``agent.metered``) of the harvest and the
sweep's model pass, and appends one content-free line per call: the time, the kind
(``harvest``, ``sweep``), ok or failed with its reason code (``model_timeout``,
``context_full``, ...), the tokens the backend reported, and whether the budget gate
records the call too (``gated``). ``tether usage`` counts the lines (``core.spend.usage_rows``):
failed calls always, and the calls and tokens of ungated ones, which the budget ledger
never sees. A reply that came back but is not a page (``model_output_malformed``) is its
ok line and then a failed line (the extractor says so through ``malformed``): one call,
one failure. A call the budget gate refuses is not a model call (nothing was sent): the
ledger counts it as ``refused``.

A line is one ``write`` on an ``O_APPEND`` descriptor; a failure to write never fails the
call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tether.core.spend.usage_rows import CallRecord
from tether.errors import ContextFullError, LlmTimeoutError, LlmUnreachableError
from tether.records import Completion, SpendKind

CALLS_FILE = Path("telemetry") / "model_calls.jsonl"


def failure_reason(exc: BaseException) -> str:
    """A failed call's reason code (content-free)."""
    if isinstance(exc, LlmTimeoutError):
        return "model_timeout"
    if isinstance(exc, ContextFullError):
        return "context_full"
    if isinstance(exc, LlmUnreachableError):
        return "model_unreachable"
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason.startswith("budget_"):
        return reason
    return "model_failed"


def append_call(home: Path, record: CallRecord) -> None:
    doc = {
        "time": record.time.isoformat().replace("+00:00", "Z"),
        "kind": record.kind,
        "session": record.session,
        "ok": record.ok,
        "reason": record.reason,
        "gated": record.gated,
        "cache_n": record.cache_n,
        "prompt_n": record.prompt_n,
        "predicted_n": record.predicted_n,
    }
    line = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
    path = home / CALLS_FILE
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        return


def read_calls(home: Path) -> list[CallRecord]:
    """Every call line of the home (a torn or foreign line is skipped)."""
    try:
        raw = (home / CALLS_FILE).read_bytes()
    except OSError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            d = json.loads(line)
            out.append(
                CallRecord(
                    time=datetime.fromisoformat(str(d["time"]).replace("Z", "+00:00")),
                    kind=d["kind"],
                    session=str(d.get("session") or d["kind"]),
                    ok=bool(d["ok"]),
                    reason=d.get("reason"),
                    gated=bool(d.get("gated", False)),
                    cache_n=int(d.get("cache_n", 0)),
                    prompt_n=int(d.get("prompt_n", 0)),
                    predicted_n=int(d.get("predicted_n", 0)),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return out


class CallLog:
    """Where one kind of extraction call is counted: a line per call of the call log
    (``agent.metered.Meter.call`` writes it when the call ends), and this writer's own
    counts (the harvest reports them)."""

    def __init__(
        self,
        home: Path,
        kind: SpendKind,
        *,
        now: Callable[[], datetime],
        session: str | None = None,
    ) -> None:
        self.home = home
        self.kind: SpendKind = kind
        self.now = now
        self.session = session or kind
        #: Calls that came back, and calls that failed (a malformed reply counts too).
        self.ok = 0
        self.failed = 0

    def count(
        self, completion: Completion | None, failure: BaseException | None, *, gated: bool
    ) -> None:
        """One call ended: ok with ``completion``, or failed with ``failure`` (a budget
        refusal is not a call: nothing was sent, the ledger counts it)."""
        if completion is not None:
            self.ok += 1
            self.record(True, None, completion, gated=gated)
            return
        reason = failure_reason(failure) if failure is not None else "model_failed"
        if not reason.startswith("budget_"):
            self.failed += 1
            self.record(False, reason, None, gated=gated)

    def malformed(self, *, gated: bool = False) -> None:
        """The last call's reply was not a page: a failed line (the call's own ok line
        holds its tokens)."""
        self.failed += 1
        self.record(False, "model_output_malformed", None, gated=gated)

    def record(
        self, ok: bool, reason: str | None, completion: Completion | None, *, gated: bool
    ) -> None:
        append_call(
            self.home,
            CallRecord(
                time=self.now(),
                kind=self.kind,
                session=self.session,
                ok=ok,
                reason=reason,
                gated=gated,
                cache_n=completion.cache_n if completion else 0,
                prompt_n=completion.prompt_n if completion else 0,
                predicted_n=completion.predicted_n if completion else 0,
            ),
        )
