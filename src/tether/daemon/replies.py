"""What the daemon's local API answers, as records: the server encodes them, the client
decodes them strictly, and the CLI's in-process path builds the very same ones, through the
same functions, so the two ways of running a turn cannot drift apart.

The JSON of these records is read by scripts as well as by the CLI: keep every field's
name, and keep ``null`` where it is ``null`` today (an absent ``kind`` is absent). The
client refuses a missing or wrongly typed field and ignores one it does not know: keys may
be added, never renamed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from tether.agent.compaction import CompactionDone
from tether.agent.outcomes import TurnDone, TurnFailedError
from tether.checkpoint.bank import BankCode
from tether.errors import TetherError
from tether.records import TurnErrorKind

SummarySource = Literal["model", "fallback", "recovered"]


class DaemonProtocolError(TetherError):
    """The daemon answered with a body that is not the reply its route promises (a
    different tether version on the socket, or something else listening on it)."""

    def __init__(self, socket: Path, status: int, problem: str) -> None:
        super().__init__(
            f"daemon at {socket} answered HTTP {status} with a body we cannot read: {problem}"
        )
        self.socket = socket
        self.status = status
        self.problem = problem


class UsageReply(msgspec.Struct, frozen=True):
    cache_n: int
    prompt_n: int
    predicted_n: int


class TurnReply(msgspec.Struct, frozen=True):
    """``POST /v1/turn``: the answer to one owner message."""

    session: str
    turn: int
    epoch: int
    slot: int
    reply: str
    untrusted: bool
    usage: UsageReply | None


class CompactReply(msgspec.Struct, frozen=True):
    """``POST /v1/compact``, and ``tether session compact --json``."""

    session: str
    from_epoch: int
    to_epoch: int
    summary: SummarySource
    summary_chars: int
    segment: str | None
    segment_code: BankCode | None


class HealthReply(msgspec.Struct, frozen=True):
    """``GET /v1/health``."""

    status: Literal["ok"]
    pid: int
    home: str


class ErrorReply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Any route that did not do its work. ``exit_code`` is the one the CLI exits with;
    ``kind`` is there only for a failed turn."""

    error: str
    kind: TurnErrorKind | None = None
    exit_code: int


def turn_reply(done: TurnDone) -> TurnReply:
    u = done.usage
    return TurnReply(
        session=done.session,
        turn=done.turn,
        epoch=done.epoch,
        slot=done.slot,
        reply=done.reply,
        untrusted=done.untrusted,
        usage=None if u is None else UsageReply(u.cache_n, u.prompt_n, u.predicted_n),
    )


def compact_reply(done: CompactionDone) -> CompactReply:
    bank = done.bank
    return CompactReply(
        session=done.session,
        from_epoch=done.from_epoch,
        to_epoch=done.to_epoch,
        summary=done.source,
        summary_chars=done.summary_chars,
        segment=None if bank is None or bank.path is None else str(bank.path),
        segment_code=None if bank is None else bank.code,
    )


def error_reply(exc: TetherError) -> ErrorReply:
    kind = exc.kind if isinstance(exc, TurnFailedError) else None
    return ErrorReply(error=str(exc), kind=kind, exit_code=exc.exit_code)
