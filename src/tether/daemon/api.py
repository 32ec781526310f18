"""The daemon's local API (Starlette) and the client the CLI uses to reach it.

The socket lives in ``<home>/run/`` which is created 0700: uvicorn makes the socket file
itself 0666, so the directory is what keeps other users out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tether.agent.compaction import CompactionDone
from tether.agent.turn import TurnDone, TurnFailedError
from tether.daemon.compose import Runtime
from tether.errors import BadInputError, TetherError

RUN_DIR = "run"
SOCKET = "tether.sock"
log = logging.getLogger("tether.daemon")


def socket_path(home: Path) -> Path:
    return home / RUN_DIR / SOCKET


def socket_accepts(path: Path) -> bool:
    """True when something listens on the Unix socket at ``path`` (a file left by a dead
    daemon refuses the connection)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


class CompactRequest(msgspec.Struct, forbid_unknown_fields=True):
    session: str


def compaction_json(done: CompactionDone) -> dict[str, Any]:
    bank = done.bank
    return {
        "session": done.session,
        "from_epoch": done.from_epoch,
        "to_epoch": done.to_epoch,
        "summary": done.source,
        "summary_chars": done.summary_chars,
        "segment": None if bank is None or bank.path is None else str(bank.path),
        "segment_code": None if bank is None else bank.code,
    }


class TurnRequest(msgspec.Struct, forbid_unknown_fields=True):
    session: str
    text: str
    speaker: str | None = None


def turn_json(done: TurnDone) -> dict[str, Any]:
    usage = None
    if done.usage is not None:
        usage = {
            "cache_n": done.usage.cache_n,
            "prompt_n": done.usage.prompt_n,
            "predicted_n": done.usage.predicted_n,
        }
    return {
        "session": done.session,
        "turn": done.turn,
        "epoch": done.epoch,
        "slot": done.slot,
        "reply": done.reply,
        "untrusted": done.untrusted,
        "usage": usage,
    }


def log_turn(done: TurnDone) -> None:
    u = done.usage
    log.info(
        "turn session=%s turn=%d epoch=%d slot=%d cache_n=%s prompt_n=%s predicted_n=%s "
        "untrusted=%s ms=%.0f",
        done.session,
        done.turn,
        done.epoch,
        done.slot,
        u.cache_n if u else "-",
        u.prompt_n if u else "-",
        u.predicted_n if u else "-",
        done.untrusted,
        done.elapsed_ms,
    )


def build_app(runtime: Runtime) -> Starlette:
    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "pid": os.getpid(), "home": str(runtime.home)})

    async def turn(request: Request) -> JSONResponse:
        try:
            req = msgspec.json.decode(await request.body(), type=TurnRequest)
        except msgspec.DecodeError as exc:
            return JSONResponse({"error": f"bad request: {exc}", "exit_code": 2}, status_code=400)
        try:
            done = await runtime.agent.run_turn(req.session, req.text, speaker=req.speaker)
        except TurnFailedError as exc:
            log.warning("turn session=%s failed kind=%s: %s", req.session, exc.kind, exc.cause)
            return JSONResponse(
                {"error": str(exc), "kind": exc.kind, "exit_code": 1}, status_code=502
            )
        except TetherError as exc:
            code = 400 if exc.exit_code == 2 else 500
            return JSONResponse({"error": str(exc), "exit_code": exc.exit_code}, status_code=code)
        log_turn(done)
        # Compaction runs after the reply goes out; the next turn of this session waits
        # for it on the busy set, other sessions do not.
        if done.compact_due:
            task = asyncio.create_task(_compact_after(done.session))
            background.add(task)
            task.add_done_callback(background.discard)
        return JSONResponse(turn_json(done))

    async def _compact_after(sid: str) -> None:
        try:
            await runtime.agent.compact_if_due(sid)
        except TetherError as exc:
            log.warning("compaction session=%s failed: %s", sid, exc)

    async def compact(request: Request) -> JSONResponse:
        try:
            req = msgspec.json.decode(await request.body(), type=CompactRequest)
            done = await runtime.agent.compact_now(req.session)
        except msgspec.DecodeError as exc:
            return JSONResponse({"error": f"bad request: {exc}", "exit_code": 2}, status_code=400)
        except TetherError as exc:
            code = 400 if exc.exit_code == 2 else 500
            return JSONResponse({"error": str(exc), "exit_code": exc.exit_code}, status_code=code)
        return JSONResponse(compaction_json(done))

    background: set[asyncio.Task[None]] = set()
    app = Starlette(
        routes=[
            Route("/v1/health", health),
            Route("/v1/turn", turn, methods=["POST"]),
            Route("/v1/compact", compact, methods=["POST"]),
        ]
    )
    app.state.background = background
    return app


class DaemonClient:
    """Talks to a running daemon over its socket (sync: the CLI is sync)."""

    def __init__(self, home: Path, timeout_s: float) -> None:
        self.path = socket_path(home)
        self._client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.path)),
            base_url="http://tether",
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def alive(self) -> bool:
        # A raw connect first: httpx leaks its socket when a stale socket file refuses.
        if not socket_accepts(self.path):
            return False
        try:
            return self._client.get("/v1/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def turn(self, session: str, text: str) -> dict[str, Any]:
        return self._post("/v1/turn", {"session": session, "text": text})

    def compact(self, session: str) -> dict[str, Any]:
        return self._post("/v1/compact", {"session": session})

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self._client.post(path, json=payload)
        except httpx.HTTPError as exc:
            raise TetherError(f"daemon at {self.path} stopped answering: {exc}") from None
        body: dict[str, Any] = resp.json()
        if resp.status_code == 200:
            return body
        if body.get("exit_code") == 2:
            raise BadInputError(str(body.get("error")))
        raise TetherError(str(body.get("error", f"daemon answered HTTP {resp.status_code}")))
