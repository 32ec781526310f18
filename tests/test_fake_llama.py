"""The fake llama-server's protocol, spoken to with plain HTTP as any client would."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from typing import Any

import httpx
import pytest

from tether.core.context.tokens import pieces
from tether.testing import FakeLlama, Reply

CHAT = "/v1/chat/completions"


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=256, parallel=2) as server:
        yield server


@pytest.fixture
def http(fake: FakeLlama) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=10.0) as client:
        yield client


def chat(http: httpx.Client, *texts: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": t} for t in texts]
    response = http.post(CHAT, json={"messages": messages, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_health_and_slots(http: httpx.Client) -> None:
    assert http.get("/health").json() == {"status": "ok"}
    assert http.get("/slots").json() == [
        {"id": 0, "n_ctx": 256, "is_processing": False, "n_cached": 0},
        {"id": 1, "n_ctx": 256, "is_processing": False, "n_cached": 0},
    ]


def test_a_connection_stays_open_between_requests(fake: FakeLlama) -> None:
    # llama-server speaks HTTP/1.1 with keep-alive; a client's pool reuses connections.
    host, port = fake.url.removeprefix("http://").rsplit(":", 1)
    connection = HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(3):
            connection.request("GET", "/health")
            response = connection.getresponse()
            assert response.version == 11
            assert response.read() == b'{"status": "ok"}'
            assert not response.will_close
    finally:
        connection.close()


def test_tokenize_gives_stable_ids_one_per_piece(http: httpx.Client) -> None:
    text = "The quick brown fox, again."
    first = http.post("/tokenize", json={"content": text}).json()["tokens"]
    assert first == http.post("/tokenize", json={"content": text}).json()["tokens"]
    assert len(first) == len(pieces(text))
    assert all(isinstance(t, int) for t in first)


def test_completion_has_llama_server_shape(http: httpx.Client) -> None:
    body = chat(http, "Say something nice about tests", id_slot=0, cache_prompt=True)
    (choice,) = body["choices"]
    assert choice["message"] == {
        "role": "assistant",
        "content": "ok: Say something nice about tests",
    }
    assert choice["finish_reason"] == "stop"
    assert body["object"] == "chat.completion"
    usage, timings = body["usage"], body["timings"]
    assert usage["prompt_tokens"] == timings["cache_n"] + timings["prompt_n"]
    assert usage["completion_tokens"] == timings["predicted_n"] > 0
    assert usage["prompt_tokens_details"]["cached_tokens"] == timings["cache_n"]


def test_default_reply_echoes_at_most_forty_characters(http: httpx.Client) -> None:
    text = "x" * 100
    assert chat(http, "first", text)["choices"][0]["message"]["content"] == "ok: " + "x" * 40


def test_slot_caches_prompt_and_reply(fake: FakeLlama, http: httpx.Client) -> None:
    body = chat(http, "remember this", id_slot=1, cache_prompt=True)
    cached = fake.slot_tokens(1)
    assert len(cached) == body["usage"]["total_tokens"]
    assert "".join(cached).endswith("ok: remember this<|im_end|>\n")
    assert fake.slot_tokens(0) == []
    assert http.get("/slots").json()[1]["n_cached"] == len(cached)


def test_repeating_a_prompt_still_evaluates_its_last_token(http: httpx.Client) -> None:
    chat(http, "same", id_slot=0, cache_prompt=True)
    chat(http, "other", id_slot=0, cache_prompt=True)
    again = chat(http, "other", id_slot=0, cache_prompt=True)
    assert again["timings"]["prompt_n"] == 1


def test_cache_prompt_false_reuses_nothing(http: httpx.Client) -> None:
    chat(http, "hello", id_slot=0)
    again = chat(http, "hello", id_slot=0, cache_prompt=False)
    assert again["timings"]["cache_n"] == 0


def test_missing_or_minus_one_slot_means_slot_zero(fake: FakeLlama, http: httpx.Client) -> None:
    chat(http, "no slot given")
    assert fake.slot_tokens(0)
    chat(http, "no slot given", "more", id_slot=-1)
    assert fake.requests[-1].cache_n > 0
    assert [r.slot for r in fake.requests] == [None, -1]


def test_out_of_range_slot_is_a_json_400(fake: FakeLlama, http: httpx.Client) -> None:
    response = http.post(CHAT, json={"messages": [{"role": "user", "content": "x"}], "id_slot": 2})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert fake.requests[-1].status == 400


def test_context_overflow_has_llama_servers_exact_body(fake: FakeLlama, http: httpx.Client) -> None:
    fake.script(Reply(content="kept for later"))
    messages = [{"role": "user", "content": " ".join(["word"] * 300)}]
    response = http.post(CHAT, json={"messages": messages, "id_slot": 0})
    assert response.status_code == 400
    n = fake.requests[-1].n_tokens
    assert response.json() == {
        "error": {
            "code": 400,
            "message": f"request ({n} tokens) exceeds the available context size "
            "(256 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n,
            "n_ctx": 256,
        }
    }
    # A refused request does not consume the scripted reply or touch the slot.
    assert fake.slot_tokens(0) == []
    assert chat(http, "short")["choices"][0]["message"]["content"] == "kept for later"


def test_scripts_are_fifo_and_slot_scripts_stay_on_their_slot(
    fake: FakeLlama, http: httpx.Client
) -> None:
    fake.script(Reply(content="for slot 1"), slot=1)
    fake.script(Reply(content="any A"))
    fake.script(Reply(content="any B"))

    def content(slot: int) -> str:
        reply: str = chat(http, "hi", id_slot=slot)["choices"][0]["message"]["content"]
        return reply

    assert [content(0), content(0), content(1), content(1)] == [
        "any A",
        "any B",
        "for slot 1",
        "ok: hi",
    ]


def test_scripted_tool_call_has_openai_shape(fake: FakeLlama, http: httpx.Client) -> None:
    fake.script(Reply(content="", tool_calls=[("recall", {"query": "paris"})]))
    body = chat(http, "what did we decide?")
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "recall"
    assert call["function"]["arguments"] == '{"query": "paris"}'
    assert call["id"]


def test_requests_on_one_slot_wait_while_another_slot_answers(
    fake: FakeLlama, http: httpx.Client
) -> None:
    fake.script(Reply(content="slow", delay_s=30.0), slot=0)
    results: list[int] = []
    busy = threading.Thread(target=lambda: results.append(len(chat(http, "slow one", id_slot=0))))
    busy.start()
    for _ in range(200):  # until the slow request holds slot 0
        if http.get("/slots").json()[0]["is_processing"]:
            break
        time.sleep(0.01)
    assert chat(http, "quick", id_slot=1)["choices"][0]["message"]["content"] == "ok: quick"
    slots = http.get("/slots").json()
    assert (slots[0]["is_processing"], slots[1]["is_processing"]) == (True, False)
    fake.stop()  # wakes the delayed reply, which is still delivered
    busy.join()
    assert results


def test_bad_json_unknown_paths_and_bad_messages_answer_json_errors(http: httpx.Client) -> None:
    bad = http.post(CHAT, content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    missing = http.get("/v1/models-that-do-not-exist")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    no_messages = http.post(CHAT, json={"prompt": "hi"})
    assert no_messages.status_code == 400
    assert "messages" in no_messages.json()["error"]["message"]


def test_out_of_process_control_endpoints(fake: FakeLlama, http: httpx.Client) -> None:
    scripted = {"content": "", "tool_calls": [["weather", {"city": "Oslo"}]], "slot": 1}
    assert http.post("/fake/script", json=scripted).status_code == 200
    body = chat(http, "weather?", id_slot=1, cache_prompt=True)
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "weather"
    recorded = http.get("/fake/requests").json()
    assert len(recorded) == 1
    assert recorded[0]["slot"] == 1
    assert recorded[0]["cache_prompt"] is True
    assert recorded[0]["messages"] == [{"role": "user", "content": "weather?"}]
    assert recorded[0]["n_tokens"] == recorded[0]["cache_n"] + recorded[0]["prompt_n"]

    typo = http.post("/fake/script", json={"contnet": "oops"})
    assert typo.status_code == 400
    assert http.post("/fake/script", json={"content": "x", "slot": 9}).status_code == 400

    assert http.post("/fake/reset").status_code == 200
    assert http.get("/fake/requests").json() == []
    assert fake.slot_tokens(1) == []


def test_serve_forever_prints_its_url_and_stops_on_sigterm() -> None:
    code = "from tether.testing import serve_forever; serve_forever('127.0.0.1', 0, 1024, 3)"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        try:
            prefix = "fake llama-server listening on "
            assert line.startswith(prefix), line
            url, rest = line.removeprefix(prefix).split(" ", 1)
            assert rest == "(n_ctx=1024 per slot, 3 slots)"
            slots = httpx.get(f"{url}/slots", timeout=10.0).json()
            assert [s["n_ctx"] for s in slots] == [1024, 1024, 1024]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
