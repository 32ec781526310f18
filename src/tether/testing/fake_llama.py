"""A fake llama-server: a real HTTP server on loopback that speaks llama-server's protocol.

Why a server and not a mock: the code under test opens real connections, sends real JSON
and sees real status codes, and the fake can run out of process (``tether fake-llm``) for
the CLI, the daemon and benchmarks. What it models, because tether depends on it:

- **Slots with a KV cache**: each slot keeps the tokens of its last prompt plus reply;
  ``cache_n`` is the common prefix with that cache, ``prompt_n`` the rest. Requests on one
  slot are serialised (a busy slot); different slots run concurrently.
- **Context overflow** with llama-server's exact error body; like the real server it
  refuses ``n_prompt_tokens >= n_ctx``.
- **Scripted replies** (content, tool calls, delay, error status), per slot or for any
  slot, FIFO; else a deterministic ``"ok: "`` echo of the last user message.
- **A record of every chat request** for assertions.

Tokens: a ChatML-like template, each segment split by ``tether.core.context.tokens.pieces``; the
role marker and ``<|im_end|>`` plus newline are single tokens (the latter is the model's
end of turn), so a reply costs its pieces plus one and, sent back in the next request,
renders to exactly what the slot cached.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import zlib
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

import msgspec

from tether.core.context.tokens import pieces
from tether.testing.fake_protocol import (
    IM_END,
    BadRequest,
    body_tokens,
    common_prefix,
    context_error_json,
    error_json,
    message_text,
    render,
    request_json_schema,
    request_messages,
)

__all__ = [
    "FakeLlama",
    "RecordedRequest",
    "Reply",
    "context_error_json",
    "error_json",
    "render",
    "serve_forever",
]


class Reply(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A scripted answer. ``tool_calls`` are ``(name, args)``; args given as a string are
    sent verbatim (to script malformed arguments). A non-200 ``status`` or an
    ``error_body`` (JSON object or raw text) is sent instead of a completion."""

    content: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = []
    delay_s: float = 0.0
    status: int = 200
    error_body: dict[str, Any] | str | None = None


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One chat request as the fake saw it. ``slot`` is ``id_slot`` as sent (None when
    absent); ``cache_prompt`` likewise; ``n_tokens`` is the rendered prompt's length;
    ``time`` is ``time.monotonic()`` at arrival; ``status`` is what the fake answered."""

    path: str
    slot: int | None
    messages: list[dict[str, Any]]
    tools: list[Any]
    cache_prompt: bool | None
    cache_n: int
    prompt_n: int
    n_tokens: int
    json_schema: dict[str, Any] | None
    time: float
    status: int
    body: dict[str, Any]


class _Slot:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # serialises requests on this slot
        self.tokens: list[str] = []  # guarded by FakeLlama._lock
        self.processing = False


def _default_reply(messages: list[dict[str, Any]]) -> Reply:
    users = [m for m in messages if m.get("role") == "user"]
    last = message_text(users[-1].get("content")) if users else ""
    return Reply(content="ok: " + last[:40])


def _encode_args(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


# -- the server --------------------------------------------------------------------------


class FakeLlama:
    """The fake server. ``with FakeLlama() as fake:`` starts it on a free loopback port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        n_ctx: int = 4096,
        parallel: int = 2,
        *,
        latency_s: float = 0.0,
        prefill_s_per_token: float = 0.0,
    ) -> None:
        """``latency_s`` is added to every request and ``prefill_s_per_token`` for each
        prompt token not served from the slot's cache (so a cold prefix costs time, as on
        a real server); both default to 0 (answer at once)."""
        if n_ctx < 1 or parallel < 1:
            raise ValueError(f"n_ctx and parallel must be >= 1 (got {n_ctx}, {parallel})")
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.parallel = parallel
        self.latency_s = latency_s
        self.prefill_s_per_token = prefill_s_per_token
        self._lock = threading.Lock()  # guards everything below and each slot's tokens
        self._slots = [_Slot() for _ in range(parallel)]
        self._queues: dict[int | None, deque[Reply]] = {}
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeLlama:
        """Bind and serve in a daemon thread; ``url`` is valid afterwards."""
        if self._server is not None:
            raise RuntimeError("FakeLlama is already started")
        self._stopping.clear()
        server = _Server((self.host, self.port), self)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=f"fake-llama:{self.port}",
        )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; delayed replies in flight wake up at once."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakeLlama:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        if self._server is None:
            raise RuntimeError("FakeLlama is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- test controls -------------------------------------------------------------------

    def script(self, reply: Reply, slot: int | None = None) -> None:
        """Queue ``reply`` for the next request on ``slot`` (or on any slot when None)."""
        if slot is not None and not 0 <= slot < self.parallel:
            raise ValueError(f"slot {slot} out of range 0..{self.parallel - 1}")
        with self._lock:
            self._queues.setdefault(slot, deque()).append(reply)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every chat request so far, in the order they were answered (a copy)."""
        with self._lock:
            return list(self._requests)

    def slot_tokens(self, slot: int) -> list[str]:
        """The tokens cached in ``slot`` (last prompt plus its reply)."""
        with self._lock:
            return list(self._slots[slot].tokens)

    def reset(self) -> None:
        """Forget scripts, recorded requests and every slot's cache."""
        with self._lock:
            self._queues.clear()
            self._requests.clear()
            for slot in self._slots:
                slot.tokens = []

    # -- request handling (called from handler threads) ----------------------------------

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """Answer one HTTP request: (status, JSON payload or raw text)."""
        try:
            route = (method, path)
            if route == ("GET", "/health"):
                return 200, {"status": "ok"}
            if route == ("GET", "/slots"):
                return 200, self._slots_json()
            if route == ("GET", "/fake/requests"):
                return 200, msgspec.to_builtins(self.requests)
            if route == ("POST", "/fake/reset"):
                self.reset()
                return 200, {"status": "ok"}
            if method == "POST" and path in ("/tokenize", "/fake/script", *_CHAT_PATHS):
                return self._post(path, _json_object(body))
            return 404, error_json(404, "File Not Found", "not_found_error")
        except BadRequest as exc:
            return 400, error_json(400, exc.message, "invalid_request_error")

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/tokenize":
            content = body.get("content")
            if not isinstance(content, str):
                raise BadRequest("'content' must be a string")
            return 200, {"tokens": [zlib.crc32(p.encode()) for p in pieces(content)]}
        if path == "/fake/script":
            slot = body.pop("slot", None)
            try:
                self.script(msgspec.convert(body, Reply), slot)
            except (msgspec.ValidationError, ValueError, TypeError) as exc:
                raise BadRequest(f"bad script: {exc}") from None
            return 200, {"status": "ok"}
        return self._chat(path, body)

    def _slots_json(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {
                    "id": i,
                    "n_ctx": self.n_ctx,
                    "is_processing": s.processing,
                    "n_cached": len(s.tokens),
                }
                for i, s in enumerate(self._slots)
            ]

    def _chat(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        arrived = time.monotonic()
        messages = request_messages(body)
        tools = body.get("tools") or []
        if not isinstance(tools, list):
            raise BadRequest("'tools' must be a list")
        tokens = render(tools, messages)
        id_slot = body.get("id_slot")
        index = 0 if id_slot in (None, -1) else id_slot
        counts = (0, 0)
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < self.parallel:
            with self._slots[index].lock:
                self._set_processing(index, True)
                try:
                    status, payload, counts = self._answer(index, tokens, body)
                finally:
                    self._set_processing(index, False)
        else:
            problem = f"id_slot {id_slot!r} is not a slot (0..{self.parallel - 1} or -1)"
            status, payload = 400, error_json(400, problem, "invalid_request_error")
        recorded = RecordedRequest(
            path=path,
            slot=id_slot,
            messages=messages,
            tools=tools,
            cache_prompt=body.get("cache_prompt"),
            cache_n=counts[0],
            prompt_n=counts[1],
            n_tokens=len(tokens),
            json_schema=request_json_schema(body),
            time=arrived,
            status=status,
            body=body,
        )
        with self._lock:
            self._requests.append(recorded)
        return status, payload

    def _set_processing(self, index: int, value: bool) -> None:
        with self._lock:
            self._slots[index].processing = value

    def _answer(
        self, index: int, tokens: list[str], body: dict[str, Any]
    ) -> tuple[int, Any, tuple[int, int]]:
        """Run one request on its (locked) slot: (status, payload, (cache_n, prompt_n))."""
        slot, n = self._slots[index], len(tokens)
        if n >= self.n_ctx:  # llama-server refuses a prompt that leaves no room to answer
            return 400, context_error_json(n, self.n_ctx), (0, 0)
        with self._lock:
            # The slot's token list is replaced, never mutated, and only by requests on
            # this slot (which hold its lock): compare outside the lock every slot shares.
            cached = slot.tokens
            queue = self._queues.get(index) or self._queues.get(None)
            reply = queue.popleft() if queue else _default_reply(body["messages"])
            self._served += 1
            served = self._served
        use_cache = body.get("cache_prompt") is not False  # llama-server's default: on
        cache_n = common_prefix(cached, tokens) if use_cache else 0
        # Like llama-server: the last prompt token is always evaluated, to get logits.
        cache_n = min(cache_n, n - 1)
        counts = (cache_n, n - cache_n)
        delay = reply.delay_s + self.latency_s + self.prefill_s_per_token * (n - cache_n)
        if delay > 0:
            self._stopping.wait(delay)  # a busy slot; stop() cuts it short
        if reply.status != 200 or reply.error_body is not None:
            scripted = error_json(reply.status, "scripted error", "server_error")
            return reply.status, scripted if reply.error_body is None else reply.error_body, counts
        limit = body.get("max_tokens")
        truncated = False
        if isinstance(limit, int) and limit > 0 and not reply.tool_calls:
            # Like llama-server: generation stops at max_tokens, finish_reason "length".
            content = pieces(reply.content)
            if len(content) > limit:
                reply = msgspec.structs.replace(reply, content="".join(content[:limit]))
                truncated = True
        message = _reply_message(reply, served)
        reply_tokens = [*body_tokens(message), IM_END]
        with self._lock:
            slot.tokens = [*tokens, *reply_tokens][: self.n_ctx]
        payload = _completion_json(body, message, served, counts, len(reply_tokens))
        if truncated:
            payload["choices"][0]["finish_reason"] = "length"
        return 200, payload, counts


def _reply_message(reply: Reply, served: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "type": "function",
                "function": {"name": name, "arguments": _encode_args(args)},
                "id": f"call_{served}_{i}",
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    return message


def _completion_json(
    body: dict[str, Any],
    message: dict[str, Any],
    served: int,
    counts: tuple[int, int],
    predicted_n: int,
) -> dict[str, Any]:
    """A chat completion in llama-server's shape (usage and timings included)."""
    (cache_n, prompt_n), n = counts, sum(counts)
    model = body.get("model")
    finish = "tool_calls" if "tool_calls" in message else "stop"
    return {
        "choices": [{"finish_reason": finish, "index": 0, "message": message}],
        "created": int(time.time()),
        "model": model if isinstance(model, str) and model else "fake-llama",
        "object": "chat.completion",
        "usage": {
            "completion_tokens": predicted_n,
            "prompt_tokens": n,
            "total_tokens": n + predicted_n,
            "prompt_tokens_details": {"cached_tokens": cache_n},
        },
        "id": f"chatcmpl-fake-{served}",
        "timings": {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_n * 0.01,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_n * 0.01,
        },
    }


_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body) if body else None
    except ValueError as exc:
        raise BadRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object")
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], fake: FakeLlama) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that hung up (e.g. after its timeout) is not an error here."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # As llama-server does: connections stay open between requests, so a client's
    # connection pool is exercised as it is against the real server.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``fake.requests``, not a log."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        try:
            status, payload = self.server.fake.handle(method, self.path.split("?")[0], body)
        except Exception as exc:  # a bug in the fake must still answer, loudly
            status, payload = 500, error_json(500, f"fake llama crashed: {exc!r}", "server_error")
        if isinstance(payload, str):
            data, kind = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(payload).encode(), "application/json; charset=utf-8"
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout) or went away


def serve_forever(
    host: str = "127.0.0.1", port: int = 8080, n_ctx: int = 4096, parallel: int = 2
) -> None:
    """Run a FakeLlama in the foreground until Ctrl-C or SIGTERM (``tether fake-llm``)."""
    done = threading.Event()

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        done.set()

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if in_main else None
    try:
        with FakeLlama(host, port, n_ctx, parallel) as fake:
            print(
                f"fake llama-server listening on {fake.url} "
                f"(n_ctx={n_ctx} per slot, {parallel} slots)",
                flush=True,
            )
            while not done.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
