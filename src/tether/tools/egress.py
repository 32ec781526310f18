"""``http_fetch``'s way out: check, resolve, pin, and follow redirects hop by hop.

The rules live in ``core/egress.py``; this module does the I/O around them. Each hop (the
first request and every redirect) is checked in this order, and a refusal stops the
fetch before anything is sent:

1. the scheme is ``http`` or ``https``;
2. in a tainted session, the URL passes ``[tools] tainted_fetch`` (a redirect chain that
   began at a URL the owner wrote carries nothing the model chose, so its hops pass);
3. unless the host is in ``[tools] fetch_allow``, its addresses are public: an IP literal
   is judged as written (any spelling); a name is resolved here (``getaddrinfo`` on the
   event loop) and refused if *any* of its addresses is refused;
4. the connection goes to an address that was checked: the URL's host is replaced by the
   address, the name is kept in the ``Host`` header and, for https, in TLS's server name
   (httpx's ``sni_hostname``), so the certificate is verified for the name and a second DNS
   answer cannot swap the address;
5. redirects are not followed by httpx but here, at most ``MAX_REDIRECTS``.

A refusal is logged (``tether.egress``, the URL secret-redacted) and counted in
``<home>/telemetry/egress.jsonl``: one content-free line (no URL, no host) per refusal
(runbook: fetch-refused).

What the model is told of a refusal or a failure quotes no byte a server chose: not a
redirect's target, not its host, not a header, not a protocol error's text (which can
quote the header). It names the URL the model asked for, the hop and a reason of ours. A
refusal or failure that came after a server answered (``answered``) is still marked
untrusted by the tool box and taints the session: which of our reasons applies was the
server's choice. Any failure of a fetch, whatever raised it, is a ``Failed``, never an
exception out of ``fetch``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import msgspec

from tether.config import ToolsConfig
from tether.core import egress
from tether.core.timing.scheduling import HEARTBEAT_SESSION, job_of_session
from tether.errors import UnsafeHomePathError
from tether.files import append_home
from tether.scan.urls import shown_url

log = logging.getLogger("tether.egress")
RUNBOOK = "fetch-refused"
TELEMETRY_FILE = Path("telemetry") / "egress.jsonl"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Characters of a refused URL the log keeps (after redaction).
LOGGED_URL_CHARS = 300

#: host, port -> the addresses the host resolves to (``getaddrinfo`` by default).
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Refused:
    reason: str  # "scheme" | "bad_url" | "tainted" | "redirects" | an address class
    message: str  # what the model is told (no server-chosen text)
    url: str  # the hop that was refused (server-chosen past hop 0: logged redacted only)
    hop: int  # 0: the URL asked for; n: the n-th redirect

    @property
    def answered(self) -> bool:
        """A server chose this hop (a redirect): the refusal is untrusted."""
        return self.hop > 0


@dataclass(frozen=True)
class Failed:
    message: str  # no server-chosen text
    answered: bool = False  # a server had answered before it failed: untrusted


#: What a refusal of a redirect hop says, by reason: never the target itself.
_HOP_REASONS = {
    "scheme": "a URL that is not http or https",
    "bad_url": "something that is not a URL http_fetch can read",
    "tainted": (
        "a URL this session may not fetch: it has read untrusted content, so it may fetch "
        "only URLs the owner wrote and hosts in [tools] fetch_allow"
    ),
    **{cls: what for cls, what in egress.ADDRESS_WHAT.items()},
}

#: Exceptions whose text is ours or the OS's (never a server's): a failure names them.
_LOCAL_TEXT = (httpx.ConnectError, httpx.TimeoutException)


def _failure(asked: str, exc: BaseException) -> str:
    """What the model is told of a failed request: the exception's text only when it
    cannot quote the server (a protocol error's text can quote a header line)."""
    detail = f": {exc}" if isinstance(exc, _LOCAL_TEXT) else ""
    return f"fetch of {asked} failed: {type(exc).__name__}{detail}"


@dataclass
class _Trail:
    """What one fetch has seen so far (whether any server answered)."""

    answered: bool = False


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    content_type: str
    encoding: str
    body: bytes
    redirected: bool


class EgressLog:
    """Appends one content-free line per refusal to ``path`` (its folder made on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(
        self, moment: datetime, refused: Refused, *, session: str, tainted: bool, mode: str
    ) -> None:
        kind = "heartbeat" if session == HEARTBEAT_SESSION else "chat"
        if job_of_session(session) is not None:
            kind = "job"
        line = {
            "time": moment.isoformat(),
            "tool": "http_fetch",
            "reason": refused.reason,
            "hop": refused.hop,
            "session_kind": kind,
            "tainted": tainted,
            "mode": mode,
        }
        try:
            self.path.parent.mkdir(exist_ok=True)
            append_home(self.path, msgspec.json.encode(line) + b"\n")
        except (OSError, UnsafeHomePathError) as exc:
            # A count lost is better than a turn lost: the refusal itself stands.
            log.warning("egress telemetry not written to %s: %s", self.path, exc)


class Egress:
    """Fetches one URL under the egress rules."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        tools: ToolsConfig,
        *,
        home: Path,
        resolver: Resolver = resolve,
    ) -> None:
        self.http = http
        self.mode: egress.TaintedFetch = tools.tainted_fetch
        self.allow = tuple(egress.parse_allow(e) for e in tools.fetch_allow)
        self.timeout_s = tools.fetch_timeout_s
        self.max_bytes = tools.fetch_max_bytes
        self.resolver = resolver
        self.telemetry = EgressLog(home / TELEMETRY_FILE)

    async def fetch(
        self,
        url: str,
        *,
        session: str,
        tainted: bool,
        owner_urls: frozenset[str],
        time: datetime,
    ) -> Fetched | Refused | Failed:
        trail = _Trail()
        try:
            async with asyncio.timeout(self.timeout_s):
                outcome = await self._hops(url, trail, tainted=tainted, owner_urls=owner_urls)
        except TimeoutError:
            return Failed(
                f"fetch of {url} failed: no answer within {self.timeout_s:g} s", trail.answered
            )
        except Exception as exc:
            # A fetch failure is a tool result, never a crashed turn: what raised is logged
            # for the owner; the model hears only that it failed, untrusted.
            log.warning(
                "fetch failed unexpectedly session=%s: %s",
                session,
                type(exc).__name__,
                exc_info=True,
            )
            return Failed(f"fetch of {url} failed: {type(exc).__name__}", answered=True)
        if isinstance(outcome, Refused):
            shown = shown_url(outcome.url)[:LOGGED_URL_CHARS]
            log.warning(
                "egress refused session=%s reason=%s hop=%d url=%s (runbook: %s)",
                session,
                outcome.reason,
                outcome.hop,
                shown,
                RUNBOOK,
            )
            self.telemetry(time, outcome, session=session, tainted=tainted, mode=self.mode)
        return outcome

    async def _hops(
        self, url: str, trail: _Trail, *, tainted: bool, owner_urls: frozenset[str]
    ) -> Fetched | Refused | Failed:
        asked = url
        from_owner = False
        for hop in range(egress.MAX_REDIRECTS + 1):
            try:
                current = httpx.URL(url)
                host = current.raw_host.decode("ascii")
            except (httpx.InvalidURL, UnicodeError) as exc:
                bad = Refused(
                    "bad_url", f"{url} is not a URL http_fetch can read ({exc})", url, hop
                )
                return _hop(asked, bad)
            if current.scheme not in egress.SCHEMES:
                scheme = f"{url}: http_fetch reads only http and https URLs"
                return _hop(asked, Refused("scheme", scheme, url, hop))
            port = current.port or egress.DEFAULT_PORTS[current.scheme]
            listed = egress.allowed(self.allow, host, port)
            if tainted and not (hop > 0 and from_owner):
                why = egress.tainted_refusal(
                    url, mode=self.mode, owner_urls=owner_urls, host_allowed=listed
                )
                if why is not None:
                    return _hop(asked, Refused("tainted", why, url, hop))
                if hop == 0:
                    from_owner = self.mode == "owner-urls" and (
                        egress.canonical_url(url) in owner_urls
                    )
            addresses = await self._addresses(host if hop == 0 else None, host, port)
            if isinstance(addresses, Failed):
                return Failed(addresses.message, trail.answered)
            if not listed:
                refused = _refused_address(url, host, addresses, hop)
                if refused is not None:
                    return _hop(asked, refused)
            sent = await self._send(asked, current, addresses)
            if isinstance(sent, Failed):
                return Failed(sent.message, trail.answered or sent.answered)
            response = sent
            trail.answered = True
            location = response.headers.get("location")
            if response.status_code in REDIRECTS and location:
                await response.aclose()
                try:
                    url = str(current.join(location))
                except (httpx.InvalidURL, UnicodeError, ValueError):
                    return _hop(asked, Refused("bad_url", "", location, hop + 1))
                continue
            return await self._read(asked, str(current), response, redirected=hop > 0)
        return Refused(
            "redirects",
            f"{asked} redirected more than {egress.MAX_REDIRECTS} times; not followed further",
            url,
            egress.MAX_REDIRECTS + 1,
        )

    async def _addresses(
        self, named: str | None, host: str, port: int
    ) -> list[egress.Address] | Failed:
        """``host``'s addresses; a failure names the host only when ``named`` (the model
        chose it), else it says "a redirect's host" (a server chose it)."""
        shown = named if named is not None else "a redirect's host"
        literal = egress.parse_ip(host)
        if literal is not None:
            return [literal]
        try:
            found = await self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            why = f": {exc}" if named is not None else ""
            return Failed(f"cannot resolve {shown}{why}")
        addresses: list[egress.Address] = []
        for a in found:
            try:
                addresses.append(ipaddress.ip_address(a.split("%", 1)[0]))
            except ValueError:
                return Failed(f"cannot resolve {shown}: the resolver gave no address")
        return addresses or Failed(f"cannot resolve {shown}: no address")

    async def _send(
        self, asked: str, url: httpx.URL, addresses: list[egress.Address]
    ) -> httpx.Response | Failed:
        """GET ``url`` from the first of ``addresses`` that accepts a connection."""
        headers = dict(self.http.headers)
        headers["host"] = url.netloc.decode("ascii")
        extensions: dict[str, object] = {
            "timeout": httpx.Timeout(self.timeout_s).as_dict(),
        }
        if url.scheme == "https" and egress.parse_ip(url.raw_host.decode("ascii")) is None:
            extensions["sni_hostname"] = url.raw_host.decode("ascii")
        error: Exception | None = None
        for address in addresses:
            pinned = url.copy_with(host=str(address))
            # Built by hand, not with the client's build_request: no cookie jar rides along
            # (cookies of one site must not reach a later fetch, pinned by address).
            request = httpx.Request("GET", pinned, headers=headers, extensions=extensions)
            try:
                return await self.http.send(request, stream=True, follow_redirects=False)
            except httpx.ConnectError as exc:
                error = exc
            except httpx.InvalidURL:
                # httpx builds the next request of any redirect it is given, even when it
                # follows none: a ``Location: mailto:...`` (or data:, javascript:) fails there.
                return Failed(
                    f"fetch of {asked} failed: the server redirects to something that is "
                    "not an http or https URL; not followed.",
                    answered=True,
                )
            except (httpx.HTTPError, httpx.StreamError) as exc:
                # Past the connection the server may have spoken (a broken reply).
                return Failed(_failure(asked, exc), answered=True)
        assert error is not None
        return Failed(_failure(asked, error))

    async def _read(
        self, asked: str, url: str, response: httpx.Response, *, redirected: bool
    ) -> Fetched | Failed:
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= self.max_bytes:
                    break
        except (httpx.HTTPError, httpx.StreamError) as exc:
            return Failed(_failure(asked, exc), answered=True)
        finally:
            await response.aclose()
        return Fetched(
            url=url,
            status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            encoding=response.encoding or "utf-8",
            body=bytes(body[: self.max_bytes]),
            redirected=redirected,
        )


def _hop(asked: str, refused: Refused) -> Refused:
    """A refusal of a redirect hop names the URL asked for and our reason, never the
    target (the server wrote it: it could be instructions to the model)."""
    if refused.hop == 0:
        return refused
    what = _HOP_REASONS.get(refused.reason, "a URL http_fetch refuses")
    message = f"{asked} redirects (hop {refused.hop}) to {what}; not followed."
    return Refused(refused.reason, message, refused.url, refused.hop)


def _refused_address(
    url: str, host: str, addresses: list[egress.Address], hop: int
) -> Refused | None:
    """The refusal for the first refused address of ``host`` (None: all are public)."""
    for address in addresses:
        cls = egress.address_class(address)
        if cls is None:
            continue
        name = None if egress.parse_ip(host) is not None else host
        return Refused(
            cls,
            f"{url}: {egress.describe(address, cls, name)}. http_fetch reaches only public "
            "addresses, unless the owner lists the host in [tools] fetch_allow.",
            url,
            hop,
        )
    return None
