"""The budget gate's decision: may this model call go ahead, and if not, why.

Pure: the caller hands in the caps, what the local day has spent (reservations of calls
still running at their bound), the request's bound and the prices. A request's bound is
its prompt tokens (``core.context.tokens``, plus a few per message for the chat template) plus
its ``max_tokens``: the most it can cost, so a call that is let through can never take a
day past its cap. The money bound prices the whole prompt as uncached input (the worst
case); a settled call is priced from what the server reported.

The checks run in one order (one request too big, then the kind's day, then the money),
so the same state always gives the same reason.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo

from tether.core.context import tokens
from tether.records import BudgetReason, ChatMessage, SpentToday, ToolSchema

#: Markers a chat template puts around each message (start, end) besides its role line:
#: ChatML, as llama-family templates and the fake server render it.
MARKERS = 2
MTOK = 1_000_000

# A background session's prompt is mostly the same messages call after call (a replay is
# a strict extension of the last one), so each text is counted once, not per call.
_count = functools.lru_cache(maxsize=4096)(tokens.count)


def _role(role: str) -> int:
    """A message's template tokens: its markers and its ``role`` line."""
    return MARKERS + tokens.count(f"{role}\n")


_ROLES = {role: _role(role) for role in ("system", "user", "assistant", "tool")}


@dataclass(frozen=True)
class Caps:
    """The caps that apply to one kind: ``None`` is no cap. ``day_usd`` is shared by all
    background kinds and never applies to live turns."""

    call_tokens: int | None = None
    day_tokens: int | None = None
    day_usd: float | None = None


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens: uncached input, generated output, cached input."""

    usd_per_mtok_in: float = 0.0
    usd_per_mtok_out: float = 0.0
    usd_per_mtok_cached: float = 0.0


@dataclass(frozen=True)
class Bound:
    """The most a request may cost: ``prompt`` tokens counted plus ``max_tokens``."""

    prompt: int
    max_tokens: int

    @property
    def tokens(self) -> int:
        return self.prompt + self.max_tokens


def prompt_tokens(messages: Sequence[ChatMessage], tools: Sequence[ToolSchema] = ()) -> int:
    """The deterministic count of a request's prompt as a chat template renders it: every
    message's text and tool calls in role markers, the offered tool schemas as the JSON
    the server is sent, and the opening of the reply."""
    n = _ROLES["assistant"] - 1  # the reply's opening has no end marker yet
    if tools:
        listed = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        n += _ROLES["system"] + _count(json.dumps(listed, sort_keys=True))
    # One pass of cached counts: this runs before every background call, over prompts of
    # up to a thousand messages.
    n += sum([_ROLES[m.role] + _count(m.content) for m in messages])
    for m in messages:
        if m.tool_calls:
            calls = [{"id": c.id, "name": c.name, "arguments": c.args} for c in m.tool_calls]
            n += _count(json.dumps(calls, sort_keys=True, ensure_ascii=False))
    return n


def bound_usd(bound: Bound, prices: Prices) -> float:
    return (
        bound.prompt * prices.usd_per_mtok_in + bound.max_tokens * prices.usd_per_mtok_out
    ) / MTOK


def usage_usd(cache_n: int, prompt_n: int, predicted_n: int, prices: Prices) -> float:
    """What a finished call cost: cached and uncached prompt tokens, generated tokens."""
    return (
        cache_n * prices.usd_per_mtok_cached
        + prompt_n * prices.usd_per_mtok_in
        + predicted_n * prices.usd_per_mtok_out
    ) / MTOK


def usage_tokens(cache_n: int, prompt_n: int, predicted_n: int) -> int:
    """What a finished call counts against a token cap: its whole prompt (cached or not)
    and what it generated, the same measure as its bound."""
    return cache_n + prompt_n + predicted_n


def decide(caps: Caps, spent: SpentToday, bound: Bound, prices: Prices) -> BudgetReason | None:
    """``None`` when the call may go ahead, otherwise the reason code it is refused."""
    if caps.call_tokens is not None and bound.tokens > caps.call_tokens:
        return "budget_call"
    if caps.day_tokens is not None and spent.tokens + bound.tokens > caps.day_tokens:
        return "budget_daily"
    if caps.day_usd is not None and spent.usd + bound_usd(bound, prices) > caps.day_usd:
        return "budget_usd"
    return None


def local_day(zone: tzinfo, now: datetime) -> date:
    """The owner's local date at ``now`` (an aware time): what "today" means for a cap."""
    if now.tzinfo is None:
        raise ValueError("local_day needs an aware time")
    return now.astimezone(zone).date()
