"""The pure side of compaction: trigger, fallback summary, neutralisation, carry."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tether.core.context.compaction_rules import (
    CHECKPOINTS_HEADING,
    carry_text,
    fallback_summary,
    neutralise,
    should_compact,
)
from tether.records import Assistant, LogRecord, Usage, User

T = datetime(2026, 1, 1, tzinfo=UTC)


def usage(total: int) -> Usage:
    return Usage(time=T, cache_n=total - 10, prompt_n=10, predicted_n=5)


def test_trigger_at_threshold_not_below() -> None:
    assert not should_compact(usage(8599), n_ctx=10_000, threshold=0.86)
    assert not should_compact(usage(8400), n_ctx=10_000, threshold=0.85)
    assert should_compact(usage(8500), n_ctx=10_000, threshold=0.85)
    assert not should_compact(None, n_ctx=10_000, threshold=0.85)


def test_fallback_keeps_user_texts_newest_last() -> None:
    recs: list[LogRecord] = [
        User(time=T, text="first"),
        Assistant(time=T, text="reply"),
        User(time=T, text="second"),
    ]
    out = fallback_summary(recs, 4000)
    assert out.index("first") < out.index("second")
    assert "reply" not in out


@given(st.lists(st.text(min_size=0, max_size=300), max_size=30), st.integers(0, 2000))
def test_fallback_fits_and_prefers_the_newest(texts: list[str], limit: int) -> None:
    recs: list[LogRecord] = [User(time=T, text=t) for t in texts]
    out = fallback_summary(recs, limit)
    assert len(out) <= limit
    newest = next((t.strip() for t in reversed(texts) if t.strip()), None)
    if newest is not None and len(newest) + 80 < limit:
        assert newest in out


def test_fallback_of_nothing_is_empty() -> None:
    assert fallback_summary([Assistant(time=T, text="x")], 4000) == ""


TEMPLATE_BITS = st.sampled_from(
    [
        "<|im_start|>",
        "<|im_end|>",
        "<|eot_id|>",
        "<tool_call>",
        "</tool_call>",
        "<system>",
        "</assistant>",
        "[INST]",
        "[/INST]",
        "<<SYS>>",
        "\nsystem: ",
        "\nassistant:",
        "user:",
        '{"type":"User","time":"2026-01-01T00:00:00Z","text":"x"}',
        "<function=add>",
    ]
)


@given(st.lists(st.one_of(TEMPLATE_BITS, st.text(max_size=20)), max_size=20))
def test_neutralised_text_holds_no_working_markup(parts: list[str]) -> None:
    out = neutralise("".join(parts))
    assert not re.search(r"<\|[^|>\n]*\|>", out)
    assert not re.search(r"</?(system|assistant|user|tool_call|function)\b[^>]*>", out, re.I)
    assert "[INST]" not in out
    assert "<<SYS>>" not in out
    assert not re.search(r"^\s*(system|assistant|user|tool)\s*:", out, re.I | re.M)
    for line in out.splitlines():
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        assert not (isinstance(value, dict) and "type" in value)


def test_neutralise_keeps_plain_prose() -> None:
    prose = "We agreed the garden gets watered at 7. The user asked for a reminder."
    assert neutralise(prose) == prose


def test_carry_lists_checkpoint_links() -> None:
    out = carry_text("summary here", ["tether://corpus/s.seg-abc"])
    assert out == f"summary here\n\n{CHECKPOINTS_HEADING}\n- tether://corpus/s.seg-abc"
    assert carry_text("s", []) == "s"
