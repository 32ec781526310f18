"""The broker: which tools a session may call, and what taint forbids.

Grants come from ``[tools] granted``; a scheduled session has its own when the config
gives it some (``[tools.heartbeat]``, ``[tools.jobs.<name>]``), and the tiering job
(``tier``) gets no ``http_fetch`` unless its table grants it: its prompt says "do not
fetch", and the broker makes that hold whatever the model does. A call to an ungranted
tool is refused and logged, never executed. Taint is per session: once a session has read
untrusted content, identity edits from it are refused (the session may still write notes,
which are stored untrusted), and what it may fetch narrows (``[tools] tainted_fetch``,
enforced by ``tools/egress.py``, where the URL is known). The session log is the
authority for taint (``Session.untrusted()`` reads every epoch), so taint survives
restarts and compaction with no state of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.config import ToolsConfig
from tether.core.timing.scheduling import HEARTBEAT_SESSION, TIER_JOB, job_of_session

IDENTITY_EDITS = frozenset({"add", "remove", "consolidate"})
#: What a job may not call unless its own ``[tools.jobs.<name>]`` table grants it.
JOB_DENIED_BY_DEFAULT: dict[str, frozenset[str]] = {TIER_JOB: frozenset({"http_fetch"})}


@dataclass(frozen=True)
class Refusal:
    """Why a call was not executed; the text goes back to the model as the tool result."""

    reason: str  # "not_granted" | "tainted" | "unknown_tool"
    message: str


@dataclass(frozen=True)
class Grants:
    tools: frozenset[str]
    #: Where they come from, as the owner would look it up.
    source: str


class Broker:
    def __init__(self, tools: ToolsConfig) -> None:
        self.config = tools
        self.granted = frozenset(tools.granted)

    def grants(self, session: str) -> Grants:
        """The tools ``session`` may call: a scheduled session's own, else ``granted``."""
        if session == HEARTBEAT_SESSION and self.config.heartbeat is not None:
            return Grants(frozenset(self.config.heartbeat.granted), "[tools.heartbeat] granted")
        job = job_of_session(session)
        if job is not None:
            own = self.config.jobs.get(job)
            if own is not None:
                return Grants(frozenset(own.granted), f"[tools.jobs.{job}] granted")
            denied = JOB_DENIED_BY_DEFAULT.get(job)
            if denied:
                return Grants(
                    self.granted - denied,
                    f"[tools] granted without {', '.join(sorted(denied))} for the job "
                    f"{job!r} (grant it in [tools.jobs.{job}])",
                )
        return Grants(self.granted, "[tools] granted")

    def offered(self, session: str | None = None) -> tuple[str, ...]:
        """Tools put in a new baseline: only granted ones are offered."""
        tools = self.granted if session is None else self.grants(session).tools
        return tuple(sorted(tools))

    def authorise(
        self, tool: str, *, session: str, untrusted: bool, known: frozenset[str]
    ) -> Refusal | None:
        if tool not in known:
            return Refusal("unknown_tool", f"refused: there is no tool named {tool!r}")
        grants = self.grants(session)
        if tool not in grants.tools:
            return Refusal(
                "not_granted",
                f"refused: the tool {tool!r} is not granted to this session ({grants.source})",
            )
        if untrusted and tool in IDENTITY_EDITS:
            return Refusal(
                "tainted",
                f"refused: {tool} edits identity, and this session has read untrusted "
                "content (for example a fetched web page), so it may not change who you are. "
                "Write a note instead; the owner can promote it.",
            )
        return None
