"""Replay: messages per epoch, and the strict-extension property of requests."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tether.core.context.replay import CARRY_HEADING, messages, open_turn
from tether.records import (
    Assistant,
    Baseline,
    LogRecord,
    SessionStart,
    ToolCall,
    ToolResult,
    ToolSummary,
    TurnError,
    Usage,
    User,
)

T = datetime(2026, 1, 1, tzinfo=UTC)
BASE = Baseline(system="sys", memory="mem")
text = st.text(max_size=20)


@st.composite
def turns(draw: st.DrawFn) -> list[LogRecord]:
    """One turn as the agent logs it: User, then tool rounds, then an answer or an error."""
    out: list[LogRecord] = [User(time=T, text=draw(text))]
    for round_no in range(draw(st.integers(0, 3))):
        lead = draw(st.one_of(st.none(), text))
        if lead is not None:
            out.append(Assistant(time=T, text=lead))
        n = draw(st.integers(1, 2))
        ids = [f"c{len(out)}-{round_no}-{i}" for i in range(n)]
        out += [ToolCall(time=T, id=i, name="recall", args={"q": draw(text)}) for i in ids]
        for i in ids:
            out.append(
                ToolResult(time=T, tool_call_id=i, content=draw(text), class_="m", untrusted=False)
            )
            if draw(st.booleans()):
                out.append(
                    ToolSummary(
                        time=T,
                        call="recall",
                        tool_call_id=i,
                        content="s",
                        class_="m",
                        untrusted=False,
                    )
                )
    if draw(st.booleans()):
        out.append(Assistant(time=T, text=draw(text)))
        out.append(Usage(time=T, cache_n=1, prompt_n=2, predicted_n=3))
    else:
        out.append(TurnError(time=T, kind="llm_timeout"))
    return out


@given(st.lists(turns(), max_size=5), st.one_of(st.none(), text))
def test_each_request_extends_the_previous(
    turn_list: list[list[LogRecord]], carry: str | None
) -> None:
    records: list[LogRecord] = [
        SessionStart(time=T, epoch=0 if carry is None else 1, slot=0, baseline="h")
    ]
    for t in turn_list:
        records += t
    # Requests are made after a User and after ToolResults; checking after every
    # ToolResult is stricter than the agent needs and still must hold.
    points = [i + 1 for i, r in enumerate(records) if isinstance(r, User | ToolResult)]
    previous: list[object] = []
    for p in points:
        request = messages(BASE, carry, records[:p])
        assert request[: len(previous)] == previous
        previous = list(request)
    final = messages(BASE, carry, records)
    assert final[: len(previous)] == previous


def test_carry_is_one_user_message_after_system() -> None:
    msgs = messages(BASE, "the summary", [SessionStart(time=T, epoch=1, slot=0, baseline="h")])
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].content == "sys\n\nmem"
    assert msgs[1].content == f"{CARRY_HEADING}\n\nthe summary"


def test_tool_calls_join_the_assistant_message_before_them() -> None:
    recs: list[LogRecord] = [
        User(time=T, text="q"),
        Assistant(time=T, text="let me look"),
        ToolCall(time=T, id="a", name="recall", args={"q": "x"}),
        ToolCall(time=T, id="b", name="recall", args={"q": "y"}),
        ToolResult(time=T, tool_call_id="a", content="ra", class_="m", untrusted=False),
        ToolResult(time=T, tool_call_id="b", content="rb", class_="m", untrusted=False),
        ToolSummary(
            time=T, call="recall", tool_call_id="a", content="s", class_="m", untrusted=False
        ),
        Assistant(time=T, text="answer"),
    ]
    msgs = messages(BASE, None, recs)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert msgs[2].content == "let me look"
    assert [c.id for c in msgs[2].tool_calls] == ["a", "b"]
    assert msgs[3].tool_call_id == "a"
    assert msgs[5].content == "answer"


def test_bookkeeping_records_do_not_change_the_prefix() -> None:
    recs: list[LogRecord] = [User(time=T, text="q"), Assistant(time=T, text="a")]
    extra: list[LogRecord] = [
        Usage(time=T, cache_n=1, prompt_n=1, predicted_n=1),
        TurnError(time=T, kind="llm_timeout"),
        ToolSummary(
            time=T, call="http_fetch", tool_call_id="z", content="s", class_="web", untrusted=True
        ),
    ]
    assert messages(BASE, None, recs) == messages(BASE, None, recs + extra)


def flat(turn_list: list[list[LogRecord]]) -> list[LogRecord]:
    return [r for t in turn_list for r in t]


@given(st.lists(turns(), max_size=4), turns(), st.lists(turns(), max_size=3), st.none() | text)
def test_a_turn_refused_as_session_full_never_reaches_the_model(
    before: list[list[LogRecord]],
    refused: list[LogRecord],
    after: list[list[LogRecord]],
    carry: str | None,
) -> None:
    """However the refused turn went (tool rounds, then the refusal), the requests after
    it are those of a log without it: one oversized message cannot poison the epoch."""
    head: list[LogRecord] = [SessionStart(time=T, epoch=0, slot=0, baseline="h")]
    cut = [r for r in refused if not isinstance(r, Assistant | Usage | TurnError)]
    if cut and isinstance(cut[-1], ToolCall):
        cut = cut[:-1]  # the refusal came on a request, after whole tool rounds
    with_it = [*head, *flat(before), *cut, TurnError(time=T, kind="session_full")]
    without = [*head, *flat(before)]
    assert messages(BASE, carry, with_it) == messages(BASE, carry, without)
    tail = flat(after)
    assert messages(BASE, carry, [*with_it, *tail]) == messages(BASE, carry, [*without, *tail])


@given(st.lists(turns(), max_size=4))
def test_an_open_turn_is_one_a_process_died_in(done: list[list[LogRecord]]) -> None:
    head: list[LogRecord] = [SessionStart(time=T, epoch=0, slot=0, baseline="h")]
    log = [*head, *flat(done)]
    assert not open_turn(log)  # every turn ended with an answer or a TurnError
    bare = [*log, User(time=T, text="hi")]
    assert open_turn(bare)
    assert not open_turn([*bare, TurnError(time=T, kind="interrupted")])
    calls = [
        *bare,
        ToolCall(time=T, id="x", name="note", args={}),
        Usage(time=T, cache_n=0, prompt_n=1, predicted_n=1),
    ]
    assert open_turn(calls)  # killed between the calls and their results
    result = ToolResult(time=T, tool_call_id="x", content="ok", class_="m", untrusted=False)
    assert open_turn([*calls, result])
    assert not open_turn([*calls, result, Assistant(time=T, text="done")])
