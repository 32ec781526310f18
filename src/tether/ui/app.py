"""The page's web application: the guard every request passes, and the routes.

The guard, before any route: the Host must be the loopback address the page is bound to
(no DNS rebinding), every path but ``/login`` needs a live session cookie, and a request
that changes anything must come from the page's own origin (``Origin``, and
``Sec-Fetch-Site`` when the browser sends it) and carry the session's CSRF token. Every
answer, refusals too, carries a strict Content-Security-Policy (no script at all: the page
is HTML forms and one stylesheet), ``nosniff``, no framing and ``no-store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from http.cookies import SimpleCookie
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.config import Config
from tether.errors import NotFoundError, TetherError
from tether.ui.auth import COOKIE, SESSION_TTL, UiAuth, csrf_ok, csrf_token

if TYPE_CHECKING:
    from tether.memory.vectors import Vectors
    from tether.ports import Store, SweepStore

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class UiServices:
    """What the page works with, given by whoever starts it (the CLI, from its
    application, ``daemon.app.App``: the page opens nothing itself).

    ``now``: the application's clock. ``store`` and ``sweep`` (``migrate``: with the
    sweep's tables made; else a reader): opened by the first request that needs them and
    held for the page's life, as is ``vectors``: recall's vectors (one matrix in memory,
    not one per request), or None: recall is lexical."""

    home: Path
    config: Config
    now: Callable[[], datetime]
    store: Callable[[], Store]
    sweep: Callable[[bool], SweepStore]
    vectors: Callable[[], Vectors | None] = lambda: None


def _refusal(status: int, title: str, text: str) -> HTMLResponse:
    body = (
        "<!doctype html><html><head><meta charset=utf-8><title>tether: "
        f"{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
    )
    return HTMLResponse(body, status_code=status)


class Guard:
    """The checks every request passes before it reaches a route (see the module doc)."""

    def __init__(self, app: ASGIApp, auth: UiAuth, port: int, now: Callable[[], datetime]):
        self.app = app
        self.auth = auth
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.now = now

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        refusal = self.check(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def check(self, request: Request) -> Response | None:
        if request.headers.get("host") not in self.hosts:
            return _refusal(421, "wrong host", "This page answers on its loopback address only.")
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("origin")
            site = request.headers.get("sec-fetch-site")
            if origin not in self.origins or site not in (None, "same-origin"):
                return _refusal(403, "refused", "A change must come from this page itself.")
        if request.url.path == "/login":
            return None
        session = request.cookies.get(COOKIE)
        if not self.auth.valid(session, self.now()):
            return _refusal(
                403, "not logged in", "Open the login address `tether ui` printed (it works once)."
            )
        request.scope["tether.session"] = session
        return None


class Pages:
    """Renders templates with what every page needs (the CSRF token, the actions)."""

    def __init__(self, services: UiServices) -> None:
        self.services = services
        self.env = Environment(
            loader=PackageLoader("tether.ui", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        session = request.scope.get("tether.session") or ""
        html = self.env.get_template(name).render(
            csrf=csrf_token(session),
            path=request.url.path,
            **values,
        )
        return HTMLResponse(html, status_code=status)


Handler = Callable[[Request], Awaitable[Response]]


def build_app(services: UiServices, port: int) -> ASGIApp:
    """The page for ``services.home``, guarded for the loopback ``port`` it is served on."""
    from tether.ui import actions, views

    auth = UiAuth(services.home)
    pages = Pages(services)
    css = files("tether.ui").joinpath("static/ui.css").read_bytes()

    def view(fn: Callable[[UiServices, Request], tuple[str, dict[str, Any]]]) -> Handler:
        async def handler(request: Request) -> Response:
            try:
                name, values = await run_in_threadpool(fn, services, request)
            except NotFoundError as exc:
                return pages.render(request, "error.html", 404, error=_plain(exc))
            except TetherError as exc:
                return pages.render(request, "error.html", 400, error=_plain(exc))
            return pages.render(request, name, **values)

        return handler

    def action(fn: Callable[[UiServices, Request, dict[str, str]], str]) -> Handler:
        async def handler(request: Request) -> Response:
            form = await form_of(request)
            if not csrf_ok(request.scope.get("tether.session") or "", form.get("csrf")):
                return _refusal(403, "refused", "The form's CSRF token is missing or stale.")
            try:
                where = await run_in_threadpool(fn, services, request, form)
            except TetherError as exc:
                return pages.render(request, "error.html", 400, error=_plain(exc))
            return RedirectResponse(where, status_code=303)

        return handler

    async def login(request: Request) -> Response:
        token = request.query_params.get("token", "")
        session = await run_in_threadpool(auth.redeem, token, services.now()) if token else None
        if session is None:
            return _refusal(403, "not logged in", "This login address is used up or expired.")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            session,
            max_age=int(SESSION_TTL.total_seconds()),
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response

    async def logout(request: Request) -> Response:
        form = await form_of(request)
        session = request.scope.get("tether.session") or ""
        if not csrf_ok(session, form.get("csrf")):
            return _refusal(403, "refused", "The form's CSRF token is missing or stale.")
        await run_in_threadpool(auth.logout, session)
        response = _refusal(200, "logged out", "Run `tether ui` again for a new login address.")
        response.delete_cookie(COOKIE, path="/")
        return response

    async def stylesheet(_request: Request) -> Response:
        return Response(css, media_type="text/css")

    routes = [
        Route("/login", login),
        Route("/logout", logout, methods=["POST"]),
        Route("/static/ui.css", stylesheet),
        Route("/", view(views.overview)),
        Route("/sessions", view(views.sessions)),
        Route("/sessions/{sid}", view(views.session)),
        Route("/sessions/{sid}/turns/{turn:int}", turn_link),
        Route("/segments/{name}", view(views.segment)),
        Route("/recall", view(views.recall)),
        Route("/memory", view(views.memory)),
        Route("/facts", view(views.facts)),
        Route("/journal", view(views.journal)),
        Route("/sweep", view(views.sweep)),
        Route("/jobs", view(views.jobs)),
        Route("/usage", view(views.usage)),
        Route("/scan", view(views.scan)),
        Route("/memory/identity/{eid}/edit", action(actions.edit_entry), methods=["POST"]),
        Route("/memory/identity/{eid}/remove", action(actions.remove_entry), methods=["POST"]),
        Route("/memory/notes/{nid:int}/promote", action(actions.promote_note), methods=["POST"]),
        Route("/scan/redact", action(actions.redact_secrets), methods=["POST"]),
        Route("/sessions/{sid}/discard", action(actions.discard_session), methods=["POST"]),
    ]
    return Guard(Starlette(routes=routes), auth, port, services.now)


async def turn_link(request: Request) -> Response:
    """A turn's address: its session page, on the page that holds it, at its anchor."""
    from tether.ids import session_id
    from tether.ui.reading import page_of_turn

    try:
        sid = session_id(request.path_params["sid"])
    except TetherError as exc:
        return _refusal(400, "bad address", _plain(exc).replace("<", "&lt;"))
    turn: int = request.path_params["turn"]
    return RedirectResponse(f"/sessions/{sid}?page={page_of_turn(turn)}#turn-{turn}", 303)


#: The largest form the page takes (an identity entry is at most 1,000 characters).
MAX_FORM_BYTES = 64 * 1024


async def form_of(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (the only kind the page's forms send); anything else,
    or a body over ``MAX_FORM_BYTES``, reads as an empty form, which the CSRF check then
    refuses."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return {}
    return dict(pairs)


def _plain(exc: TetherError) -> str:
    from tether.scan.secrets import redact

    return redact(str(exc)).text


def cookie_of(headers: list[str]) -> str | None:
    """The session cookie a ``Set-Cookie`` header list holds (for tests and benchmarks)."""
    for header in headers:
        jar: SimpleCookie = SimpleCookie()
        jar.load(header)
        if COOKIE in jar:
            return jar[COOKIE].value
    return None
