"""The broker: which tools a session may call, and what taint forbids.

Grants come from ``[tools] granted``; a call to an ungranted tool is refused and logged,
never executed. Taint is per session: once a session has read untrusted content, identity
edits from it are refused (the session may still write notes, which are stored untrusted).
The session log is the authority for taint (``Session.untrusted()`` reads every epoch), so
taint survives restarts and compaction with no state of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

IDENTITY_EDITS = frozenset({"add", "remove", "consolidate"})


@dataclass(frozen=True)
class Refusal:
    """Why a call was not executed; the text goes back to the model as the tool result."""

    reason: str  # "not_granted" | "tainted" | "unknown_tool"
    message: str


class Broker:
    def __init__(self, granted: frozenset[str] | set[str] | tuple[str, ...]) -> None:
        self.granted = frozenset(granted)

    def offered(self) -> tuple[str, ...]:
        """Tools put in a new baseline: only granted ones are offered."""
        return tuple(sorted(self.granted))

    def authorise(self, tool: str, *, untrusted: bool, known: frozenset[str]) -> Refusal | None:
        if tool not in known:
            return Refusal("unknown_tool", f"refused: there is no tool named {tool!r}")
        if tool not in self.granted:
            return Refusal(
                "not_granted", f"refused: the tool {tool!r} is not granted to this agent"
            )
        if untrusted and tool in IDENTITY_EDITS:
            return Refusal(
                "tainted",
                f"refused: {tool} edits identity, and this session has read untrusted "
                "content (for example a fetched web page), so it may not change who you are. "
                "Write a note instead; the owner can promote it.",
            )
        return None
