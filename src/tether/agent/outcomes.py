"""What a turn ends with: its ``TurnDone``, or the errors it fails with; and the prompt
files a turn reads (split from ``tether.agent.turn``, which re-exports these names)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether.errors import (
    BadInputError,
    ConfigError,
    ContextFullError,
    LlmError,
    LlmTimeoutError,
    LlmUnreachableError,
    TetherError,
)
from tether.files import read_home_text
from tether.records import TurnErrorKind, Usage

__all__ = ["MessageTooLargeError", "TurnDone", "TurnFailedError", "error_kind", "read_prompt"]


@dataclass(frozen=True)
class TurnDone:
    session: str
    turn: int
    epoch: int
    slot: int
    reply: str
    untrusted: bool
    usage: Usage | None
    elapsed_ms: float
    #: The session's depth reached the compaction threshold with this turn: callers
    #: compact it next (``compact_if_due``) without re-reading its logs to find out.
    compact_due: bool = False


class MessageTooLargeError(BadInputError):
    """A message that cannot fit even a fresh epoch; refused before it is logged."""

    runbook = "message-too-large"

    def __init__(self, size: int, tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"message too large: {size} bytes, about {tokens} tokens with the system prompt "
            f"and tools, and a fresh epoch holds {n_ctx} ([expect] n_ctx, or the model's trained "
            "context when smaller); nothing was logged. "
            "Send it in parts, or save it as a page (`tether page write`) for the agent to read"
        )
        self.size = size
        self.tokens = tokens
        self.n_ctx = n_ctx


class TurnFailedError(TetherError):
    """A turn ended without an answer; its TurnError record is in the log."""

    def __init__(self, session: str, kind: TurnErrorKind, cause: TetherError) -> None:
        # The cause's message, not str(cause): its runbook is this error's, said once.
        super().__init__(f"turn on session {session!r} failed ({kind}): {cause.message}")
        self.session = session
        self.kind = kind
        self.cause = cause
        self.runbook = cause.runbook or _RUNBOOK.get(kind)


_RUNBOOK: dict[str, str] = {"session_full": "session-full"}


def error_kind(exc: LlmError) -> TurnErrorKind:
    if isinstance(exc, ContextFullError):
        return "session_full"
    if isinstance(exc, LlmUnreachableError):
        return "llm_unreachable"
    if isinstance(exc, LlmTimeoutError):
        return "llm_timeout"
    return "llm_protocol"


def read_prompt(home: Path, name: str) -> str:
    path = home / "config" / name
    try:
        return read_home_text(path)  # never through a link: it becomes the system prompt
    except FileNotFoundError:
        raise ConfigError(
            path, None, "prompt file missing; run `tether init` to restore it"
        ) from None
    except (OSError, BadInputError) as exc:  # a folder, a link, a FIFO, bad UTF-8
        raise ConfigError(path, None, f"cannot read prompt file: {exc}") from None
