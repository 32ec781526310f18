"""Issue 17 item 2: one oversized message must not poison its session.

A message that cannot fit even a fresh epoch is refused before anything is logged (exit 2
from ``tether chat``, in process or through the daemon); one the estimate lets through but
the server refuses is retried once after compaction as the same turn, and a turn refused
for good is left out of every later request, so the next short turn works. The fake llama
server over HTTP, real files, real SQLite, the real CLI in child processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Daemon, daemon_home, tether
from tether.agent.outcomes import MessageTooLargeError, TurnFailedError
from tether.config import load_config
from tether.core.context.replay import fresh_tokens
from tether.daemon.compose import Runtime, build_runtime
from tether.records import TurnError, User
from tether.sessions import Session
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply, context_error_json

pytestmark = pytest.mark.anyio
N_CTX = 2048
HUGE = "zebrafish " * 4000  # 40 KB: about 8000 tokens, far past a 2048-token epoch


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=N_CTX, parallel=2) as f:
        yield f


def configure(home: Path, fake: FakeLlama, n_ctx: int = N_CTX) -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\nmax_tokens = 64\n'
        f"[expect]\nn_ctx = {n_ctx}\n[compact]\nsummary_chars = 400\n"
    )


def runtime(home: Path, fake: FakeLlama, n_ctx: int = N_CTX) -> Runtime:
    configure(home, fake, n_ctx)
    return build_runtime(home, load_config(home), clock=StepClock())


def recall_json(home: Path, query: str) -> list[dict[str, object]]:
    out = tether(home, "memory", "recall", query, "--json")
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, object]] = json.loads(out.stdout)
    return hits


def show_json(home: Path, sid: str) -> dict[str, object]:
    out = tether(home, "session", "show", sid, "--json")
    assert out.returncode == 0, out.stderr
    shown: dict[str, object] = json.loads(out.stdout)
    return shown


def user_texts(fake: FakeLlama, index: int) -> list[str]:
    return [str(m["content"]) for m in fake.requests[index].messages if m["role"] == "user"]


async def test_a_message_no_epoch_can_hold_is_refused_before_it_is_logged(
    home: Path, fake: FakeLlama
) -> None:
    rt = runtime(home, fake)
    try:
        with pytest.raises(MessageTooLargeError) as info:
            await rt.agent.run_turn("chat", HUGE)
        message = str(info.value)
        assert f"{len(HUGE.encode())} bytes" in message
        assert "holds 2048" in message
        assert "nothing was logged" in message
        assert info.value.exit_code == 2
        assert fake.requests == []  # never sent
        assert not Session.exists(home, "chat")  # not even created

        fake.script(Reply(content="short answer"))
        done = await rt.agent.run_turn("chat", "a short question")
        assert done.reply == "short answer"
        assert done.turn == 1
    finally:
        await rt.aclose()
    s = Session.open(home, "chat")
    assert [r.text for r in s.records if isinstance(r, User)] == ["a short question"]
    assert show_json(home, "chat")["turns"] == 1
    # Never indexed: no hit holds it (with vectors on, recall may still offer the nearest
    # unrelated turns, so the check is on the text, not on an empty list).
    assert all("zebrafish" not in str(h["text"]) for h in recall_json(home, "zebrafish"))


def test_chat_refuses_it_with_exit_2_in_process_and_through_the_daemon(fake: FakeLlama) -> None:
    with daemon_home(fake.url) as home:
        configure(home, fake)
        out = tether(home, "chat", "--session", "big", HUGE)
        assert out.returncode == 2, out.stderr
        assert "message too large" in out.stderr
        assert "2048" in out.stderr
        assert "Traceback" not in out.stderr
        assert not Session.exists(home, "big")

        daemon = Daemon(home)
        try:
            through = tether(home, "chat", "--session", "big", HUGE)
            assert through.returncode == 2, through.stderr
            assert "message too large" in through.stderr
            assert "Traceback" not in through.stderr
            fake.script(Reply(content="still here"))
            after = tether(home, "chat", "--session", "big", "hello again")
            assert after.returncode == 0, after.stderr
            assert after.stdout.strip() == "still here"
        finally:
            code, err = daemon.stop()
        assert code == 0, err
        assert show_json(home, "big")["turns"] == 1
        assert fake.requests
        assert all("zebrafish" not in str(r.messages) for r in fake.requests)


async def test_a_retry_after_compaction_is_one_turn_in_the_log_and_in_recall(
    home: Path, fake: FakeLlama
) -> None:
    rt = runtime(home, fake, n_ctx=32768)
    try:
        await rt.agent.run_turn("chat", "first, small")
        fake.script(Reply(status=400, error_body=context_error_json(40000, 32768)), slot=0)
        fake.script(Reply(content="Summary of epoch zero."), slot=1)
        fake.script(Reply(content="Answered in epoch one."), slot=0)
        done = await rt.agent.run_turn("chat", "the marmalade question")
        assert done.reply == "Answered in epoch one."
        assert done.turn == 2
    finally:
        await rt.aclose()
    s = Session.open(home, "chat")
    assert s.epochs == [0, 1]
    retry = [r for r in s.records if isinstance(r, User)]
    assert [(u.text, u.retry) for u in retry] == [("the marmalade question", True)]
    assert s.turns() == 2
    assert show_json(home, "chat")["turns"] == 2
    hits = [h for h in recall_json(home, "marmalade") if h["kind"] == "turn"]
    assert [(h["turn"], h["text"]) for h in hits if "marmalade" in str(h["text"])] == [
        (2, "the marmalade question")
    ]
    # The reply is filed under the turn it answers, not a turn 3.
    answer = [h for h in recall_json(home, "Answered epoch") if h["kind"] == "turn"]
    assert [h["turn"] for h in answer if "Answered in epoch one" in str(h["text"])] == [2]


async def test_a_turn_refused_for_good_is_not_replayed_and_the_next_turn_works(
    home: Path, fake: FakeLlama
) -> None:
    """The issue's case over real HTTP: a message the estimate lets through but that no
    epoch of this server can hold. It compacts once, is refused again, and then stays
    out of every request, so the next short turn of the same session is answered."""
    rt = runtime(home, fake)
    try:
        await rt.agent.run_turn("chat", "first, small")
        baseline = Session.open(home, "chat").baseline
        # The longest message the estimate still lets through: the server, which
        # renders the chat template and tool schemas in full, refuses it.
        words = 1
        while fresh_tokens(baseline, "quokka " * (words + 1)) < N_CTX:
            words += 1
        big = "quokka " * words
        sent = len(fake.requests)
        with pytest.raises(TurnFailedError) as info:
            await rt.agent.run_turn("chat", big)
        assert info.value.kind == "session_full"
        refused = [r for r in fake.requests[sent:] if r.slot == 0]
        assert len(refused) == 2  # once in epoch 0, once retried in a fresh epoch 1
        fake.script(Reply(content="the next turn works"))
        done = await rt.agent.run_turn("chat", "a short one")
        assert done.reply == "the next turn works"
        assert done.turn == 3
        assert done.epoch == 1  # no second compaction
        assert all("quokka" not in t for t in user_texts(fake, -1))
    finally:
        await rt.aclose()
    s = Session.open(home, "chat")
    kinds = [r.kind for r in s.records if isinstance(r, TurnError)]
    assert kinds == ["session_full"]
    assert s.turns() == 3
    assert show_json(home, "chat")["turns"] == 3
    turns = [h for h in recall_json(home, "quokka") if h["kind"] == "turn"]
    quokka = [h for h in turns if "quokka" in str(h["text"])]
    assert len(quokka) == 1
    assert quokka[0]["turn"] == 2


async def test_a_refused_message_is_not_carried_by_the_fallback_summary(
    home: Path, fake: FakeLlama
) -> None:
    """The summary call fails too: the owner's messages are the carry, but not the one
    that was refused, or the new epoch would start with the message that did not fit."""
    rt = runtime(home, fake, n_ctx=32768)
    try:
        await rt.agent.run_turn("chat", "remember the blue door")
        fake.script(Reply(status=400, error_body=context_error_json(40000, 32768)), slot=0)
        fake.script(Reply(status=500, error_body={"error": {"message": "boom"}}), slot=1)
        fake.script(Reply(content="answered after all"), slot=0)
        done = await rt.agent.run_turn("chat", "the walrus essay")
        assert done.reply == "answered after all"
    finally:
        await rt.aclose()
    s = Session.open(home, "chat")
    assert s.carry is not None
    assert "blue door" in s.carry
    assert "walrus" not in s.carry
    # The retried message was sent once in the new epoch, after the carry.
    assert user_texts(fake, -1)[-1] == "the walrus essay"
    assert sum("walrus" in t for t in user_texts(fake, -1)) == 1
