"""The daemon's replies on the wire: the JSON scripts may read, and what the CLI does with
a body that is not the reply it expects (a real HTTP server on the home's Unix socket, the
CLI in a child process)."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import msgspec
import pytest

from daemon_helpers import Daemon, daemon_home, tether
from tether.daemon.api import socket_path
from tether.daemon.replies import CompactReply, ErrorReply, TurnReply, UsageReply
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = pytest.mark.slow

TURN = {
    "session": "s1",
    "turn": 1,
    "epoch": 0,
    "slot": 0,
    "reply": "hi",
    "untrusted": False,
    "usage": {"cache_n": 0, "prompt_n": 9, "predicted_n": 2},
}


@contextmanager
def _socket_client(home: Path) -> Iterator[httpx.Client]:
    transport = httpx.HTTPTransport(uds=str(socket_path(home)))
    with httpx.Client(transport=transport, base_url="http://tether") as client:
        yield client


def test_the_json_on_the_wire() -> None:
    with FakeLlama(n_ctx=8192) as fake, daemon_home(fake.url) as home:
        daemon = Daemon(home)
        try:
            with _socket_client(home) as client:
                health = client.get("/v1/health").json()
                fake.script(Reply(content="héllo"))
                turn = client.post("/v1/turn", json={"session": "s1", "text": "hi"})
                bad = client.post("/v1/turn", json={"session": "s1"})
                compact = client.post("/v1/compact", json={"session": "s1"})
                missing = client.post("/v1/compact", json={"session": "nobody"})
        finally:
            daemon.stop()
    assert sorted(health) == ["home", "pid", "status"]
    assert health["status"] == "ok"
    assert turn.status_code == 200
    body = turn.json()
    assert list(body) == ["session", "turn", "epoch", "slot", "reply", "untrusted", "usage"]
    assert list(body["usage"]) == ["cache_n", "prompt_n", "predicted_n"]
    assert body["reply"] == "héllo"
    assert msgspec.json.decode(turn.content, type=TurnReply).usage == UsageReply(**body["usage"])
    # A refusal has no "kind" at all (only a failed turn has one).
    assert bad.status_code == 400
    assert bad.json() == {
        "error": "bad request: Object missing required field `text`",
        "exit_code": 2,
    }
    assert compact.status_code == 200
    assert list(compact.json()) == [
        "session",
        "from_epoch",
        "to_epoch",
        "summary",
        "summary_chars",
        "segment",
        "segment_code",
    ]
    assert msgspec.json.decode(compact.content, type=CompactReply).to_epoch == 1
    assert missing.status_code == 400
    assert list(missing.json()) == ["error", "exit_code"]


def test_a_failed_turn_names_its_kind() -> None:
    with daemon_home("http://127.0.0.1:9") as home:
        daemon = Daemon(home)
        try:
            with _socket_client(home) as client:
                resp = client.post("/v1/turn", json={"session": "s1", "text": "hi"})
        finally:
            daemon.stop()
    assert resp.status_code == 502
    assert list(resp.json()) == ["error", "kind", "exit_code"]
    error = msgspec.json.decode(resp.content, type=ErrorReply)
    assert (error.kind, error.exit_code) == ("llm_unreachable", 1)


class _Handler(BaseHTTPRequestHandler):
    """Answers health as a daemon would, and every POST with the scripted reply."""

    server: _ScriptedServer

    def do_GET(self) -> None:
        self._send(200, b'{"status":"ok","pid":1,"home":"x"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.server.paths.append(self.path)
        self._send(*self.server.reply)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ScriptedServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, reply: tuple[int, bytes]) -> None:
        super().__init__(str(path), _Handler)
        self.reply = reply
        self.paths: list[str] = []


@contextmanager
def _fake_daemon(reply: tuple[int, bytes]) -> Iterator[tuple[Path, _ScriptedServer]]:
    # Nothing listens on this inference URL: a CLI that fell back to running the turn
    # itself would fail with llm_unreachable, not with the errors asserted here.
    with daemon_home("http://127.0.0.1:9") as home:
        path = socket_path(home)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        server = _ScriptedServer(path, reply)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield home, server
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def _without(key: str) -> bytes:
    return msgspec.json.encode({k: v for k, v in TURN.items() if k != key})


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ((200, _without("reply")), "missing required field `reply`"),
        (
            (200, msgspec.json.encode({**TURN, "turn": "1"})),
            "Expected `int`, got `str` - at `$.turn`",
        ),
        (
            (200, msgspec.json.encode({**TURN, "usage": {"cache_n": 0, "prompt_n": 9}})),
            "missing required field `predicted_n` - at `$.usage`",
        ),
        ((200, b"<html>not json</html>"), "JSON is malformed"),
        ((500, b'{"detail": "boom"}'), "missing required field `error`"),
    ],
    ids=["missing-field", "wrong-type", "nested-missing", "not-json", "error-without-error"],
)
def test_chat_says_in_one_line_that_the_daemon_reply_is_unreadable(
    reply: tuple[int, bytes], problem: str
) -> None:
    with _fake_daemon(reply) as (home, server):
        out = tether(home, "chat", "--session", "s1", "hello")
    assert server.paths == ["/v1/turn"]
    assert out.returncode == 1, out.stderr
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"tether: error: daemon at {socket_path(home)} answered HTTP ")
    assert problem in lines[0]


def test_session_compact_says_the_same_of_a_wrongly_typed_reply() -> None:
    body = {
        "session": "s1",
        "from_epoch": 0,
        "to_epoch": 1,
        "summary": "a summary",  # not one of model, fallback, recovered
        "summary_chars": 9,
        "segment": None,
        "segment_code": None,
    }
    with _fake_daemon((200, msgspec.json.encode(body))) as (home, server):
        out = tether(home, "session", "compact", "s1", "--json")
    assert server.paths == ["/v1/compact"]
    assert out.returncode == 1, out.stderr
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert "answered HTTP 200 with a body we cannot read" in out.stderr
    assert "`$.summary`" in out.stderr


def test_an_error_reply_keeps_its_exit_code() -> None:
    refusal = ErrorReply(error="invalid session id 'x y': nope", exit_code=2)
    with _fake_daemon((400, msgspec.json.encode(refusal))) as (home, _):
        out = tether(home, "chat", "--session", "s1", "hello")
    assert out.returncode == 2
    assert out.stderr == "tether: error: invalid session id 'x y': nope\n"


def test_a_key_the_cli_does_not_know_is_ignored() -> None:
    # Keys may be added to a reply, never renamed: a newer daemon still answers an older CLI.
    body = msgspec.json.encode({**TURN, "reply": "still fine", "later": {"x": 1}})
    with _fake_daemon((200, body)) as (home, _):
        out = tether(home, "chat", "--session", "s1", "-v", "hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "still fine\n"
    assert out.stderr == "[session s1 turn 1 epoch 0 slot 0 cache_n 0 prompt_n 9]\n"
