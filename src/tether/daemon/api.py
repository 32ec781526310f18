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
from typing import TypeVar

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tether.agent.outcomes import TurnDone, TurnFailedError
from tether.checkpoint.ipc import HARVEST_PATH, RUN_DIR, SOCKET, socket_path
from tether.daemon.compose import Runtime
from tether.daemon.harvest import HarvestQueue
from tether.daemon.replies import (
    CompactReply,
    DaemonProtocolError,
    ErrorReply,
    HealthReply,
    TurnReply,
    compact_reply,
    error_reply,
    turn_reply,
)
from tether.errors import BadInputError, TetherError

log = logging.getLogger("tether.daemon")
R = TypeVar("R", bound=msgspec.Struct)
__all__ = ["RUN_DIR", "SOCKET", "DaemonClient", "build_app", "socket_accepts", "socket_path"]


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


class TurnRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    session: str
    text: str
    speaker: str | None = None


class CompactRequest(msgspec.Struct, forbid_unknown_fields=True):
    session: str


class HarvestRequest(msgspec.Struct, forbid_unknown_fields=True):
    session: str
    segment: str


class HarvestReply(msgspec.Struct):
    outcome: str


def _answer(reply: msgspec.Struct, status_code: int = 200) -> Response:
    return Response(msgspec.json.encode(reply), status_code, media_type="application/json")


def _refuse(exc: msgspec.DecodeError) -> Response:
    return _answer(ErrorReply(error=f"bad request: {exc}", exit_code=2), 400)


def _fail(exc: TetherError) -> Response:
    return _answer(error_reply(exc), 400 if exc.exit_code == 2 else 500)


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


def build_app(runtime: Runtime, harvest: HarvestQueue | None = None) -> Starlette:
    async def health(_: Request) -> Response:
        return _answer(HealthReply(status="ok", pid=os.getpid(), home=str(runtime.home)))

    async def turn(request: Request) -> Response:
        try:
            req = msgspec.json.decode(await request.body(), type=TurnRequest)
        except msgspec.DecodeError as exc:
            return _refuse(exc)
        try:
            done = await runtime.agent.run_turn(req.session, req.text, speaker=req.speaker)
        except TurnFailedError as exc:
            log.warning("turn session=%s failed kind=%s: %s", req.session, exc.kind, exc.cause)
            return _answer(error_reply(exc), 502)
        except TetherError as exc:
            return _fail(exc)
        log_turn(done)
        # Compaction runs after the reply goes out; the next turn of this session waits
        # for it on the busy set, other sessions do not.
        if done.compact_due:
            task = asyncio.create_task(_compact_after(done.session))
            background.add(task)
            task.add_done_callback(background.discard)
        return _answer(turn_reply(done))

    async def _compact_after(sid: str) -> None:
        try:
            await runtime.agent.compact_if_due(sid)
        except TetherError as exc:
            log.warning("compaction session=%s failed: %s", sid, exc)

    async def compact(request: Request) -> Response:
        try:
            req = msgspec.json.decode(await request.body(), type=CompactRequest)
            done = await runtime.agent.compact_now(req.session)
        except msgspec.DecodeError as exc:
            return _refuse(exc)
        except TetherError as exc:
            return _fail(exc)
        return _answer(compact_reply(done))

    async def schedule_harvest(request: Request) -> Response:
        """The hook's one round trip: a code at once, the harvest after the reply."""
        try:
            req = msgspec.json.decode(await request.body(), type=HarvestRequest)
        except msgspec.DecodeError as exc:
            return _refuse(exc)
        if harvest is None:
            return _answer(HarvestReply(outcome="skip_shutting_down"))
        return _answer(HarvestReply(outcome=harvest.schedule(req.session, req.segment)))

    background: set[asyncio.Task[None]] = set()
    app = Starlette(
        routes=[
            Route("/v1/health", health),
            Route("/v1/turn", turn, methods=["POST"]),
            Route("/v1/compact", compact, methods=["POST"]),
            Route(HARVEST_PATH, schedule_harvest, methods=["POST"]),
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

    def turn(self, session: str, text: str) -> TurnReply:
        return self._post("/v1/turn", TurnRequest(session=session, text=text), TurnReply)

    def after_turn(self, session: str) -> None:
        """Nothing to do: the daemon compacts a due session itself after each turn."""

    def compact(self, session: str) -> CompactReply:
        return self._post("/v1/compact", CompactRequest(session=session), CompactReply)

    def _post(self, path: str, request: msgspec.Struct, reply: type[R]) -> R:
        try:
            resp = self._client.post(
                path,
                content=msgspec.json.encode(request),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise TetherError(f"daemon at {self.path} stopped answering: {exc}") from None
        if resp.status_code == 200:
            return self._decode(resp, reply)
        error = self._decode(resp, ErrorReply)
        if error.exit_code == 2:
            raise BadInputError(error.error)
        raise TetherError(error.error)

    def _decode(self, resp: httpx.Response, reply: type[R]) -> R:
        try:
            return msgspec.json.decode(resp.content, type=reply)
        except msgspec.DecodeError as exc:
            raise DaemonProtocolError(self.path, resp.status_code, str(exc)) from None
