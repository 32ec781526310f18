"""Compaction decisions and texts, pure: when to compact, what to carry, how to make a
model's summary safe to carry.

The trigger is depth, never idleness: after a turn, if the epoch's last ``Usage`` says the
prompt plus cached prefix reached ``threshold x n_ctx``, the session compacts before its
next turn. A session that sits quiet for hours stays on its epoch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.core.context.replay import refused
from tether.records import LogRecord, Usage, User

CHECKPOINTS_HEADING = "Compaction checkpoints (the raw conversation, re-read with page_read):"


def depth(usage: Usage | None) -> int:
    """Tokens the slot held for the last request: cached prefix plus newly processed."""
    return 0 if usage is None else usage.cache_n + usage.prompt_n


def should_compact(last_usage: Usage | None, *, n_ctx: int, threshold: float) -> bool:
    return depth(last_usage) >= threshold * n_ctx


def fallback_summary(records: Sequence[LogRecord], limit: int) -> str:
    """The epoch's User texts, oldest first and newest last, cut to ``limit`` characters.

    When they do not all fit, the oldest go first: the newest are what the next epoch most
    needs. An empty result means there was nothing to carry.
    """
    skip = refused(records)  # a message too large to send is too large to carry
    texts = [
        r.text.strip()
        for i, r in enumerate(records)
        if isinstance(r, User) and r.text.strip() and i not in skip
    ]
    if not texts or limit <= 0:
        return ""
    heading = "The model's summary was unavailable; these are the owner's messages:\n"
    budget = limit - len(heading)
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        line = f"- {text}\n"
        if used + len(line) > budget:
            if not kept:  # the newest alone is too long: keep its end
                kept.append("- ..." + line[-(budget - 5) :] if budget > 5 else "")
            break
        kept.append(line)
        used += len(line)
    body = "".join(reversed(kept))
    return (heading + body).rstrip("\n")[:limit]


# Markup a model (or text it was shown) might use to pose as a role, a record or a tool
# call. Neutralised, not removed: the words stay readable, the syntax stops working.
_SPECIAL = re.compile(r"<\|[^|>\n]{0,40}\|>")
_TAGS = re.compile(
    r"</?\s*(system|assistant|user|tool|tool_call|tool_response|tool_result|function|"
    r"function_call|im_start|im_end|s|inst|sys)\b[^>\n]{0,200}>",
    re.IGNORECASE,
)
_BRACKETS = re.compile(r"\[/?INST\]|<</?SYS>>", re.IGNORECASE)
_ROLE_LINE = re.compile(r"^(\s*)(system|assistant|user|tool|developer)(\s*:)", re.I | re.M)
_RECORD = re.compile(r"\{\s*\"type\"\s*:")


def neutralise(text: str) -> str:
    """Defang role markers, chat-template tokens, tool-call tags and log-record lookalikes."""
    text = _SPECIAL.sub(lambda match: "‹" + match.group(0)[1:-1] + "›", text)
    text = _TAGS.sub(lambda match: "‹" + match.group(0)[1:-1] + "›", text)
    text = _BRACKETS.sub(
        lambda match: (
            match.group(0)
            .replace("[", "(")
            .replace("]", ")")
            .replace("<<", "((")
            .replace(">>", "))")
        ),
        text,
    )
    text = _ROLE_LINE.sub(lambda match: f"{match.group(1)}({match.group(2)}){match.group(3)}", text)
    return _RECORD.sub("{ type:", text)


def cap(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def carry_text(summary: str, links: Sequence[str]) -> str:
    """The summary plus a short list of the banked segments as tether:// links."""
    if not links:
        return summary
    listing = "\n".join(f"- {link}" for link in links)
    return f"{summary}\n\n{CHECKPOINTS_HEADING}\n{listing}"
