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
from tether.core.scheduling import HEARTBEAT_SESSION, job_of_session
from tether.scan.secrets import redact

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
    message: str  # what the model is told
    url: str  # the hop that was refused
    hop: int  # 0: the URL asked for; n: the n-th redirect


@dataclass(frozen=True)
class Failed:
    message: str


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
            with self.path.open("ab") as handle:
                handle.write(msgspec.json.encode(line) + b"\n")
        except OSError as exc:
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
        try:
            async with asyncio.timeout(self.timeout_s):
                outcome = await self._hops(url, tainted=tainted, owner_urls=owner_urls)
        except TimeoutError:
            return Failed(f"fetch of {url} failed: no answer within {self.timeout_s:g} s")
        if isinstance(outcome, Refused):
            shown = redact(outcome.url).text[:LOGGED_URL_CHARS]
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
        self, url: str, *, tainted: bool, owner_urls: frozenset[str]
    ) -> Fetched | Refused | Failed:
        asked = url
        from_owner = False
        for hop in range(egress.MAX_REDIRECTS + 1):
            try:
                current = httpx.URL(url)
            except httpx.InvalidURL as exc:
                return Refused(
                    "bad_url", f"{url} is not a URL http_fetch can read ({exc})", url, hop
                )
            if current.scheme not in egress.SCHEMES:
                scheme = f"{url}: http_fetch reads only http and https URLs"
                return _hop(asked, Refused("scheme", scheme, url, hop))
            host = current.raw_host.decode("ascii")
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
            addresses = await self._addresses(host, port)
            if isinstance(addresses, Failed):
                return addresses
            if not listed:
                refused = _refused_address(url, host, addresses, hop)
                if refused is not None:
                    return _hop(asked, refused)
            sent = await self._send(current, addresses)
            if isinstance(sent, Failed):
                return sent
            response = sent
            location = response.headers.get("location")
            if response.status_code in REDIRECTS and location:
                await response.aclose()
                try:
                    url = str(current.join(location))
                except httpx.InvalidURL as exc:
                    return Refused(
                        "bad_url",
                        f"{asked} redirects to {location!r}, not a URL ({exc})",
                        location,
                        hop + 1,
                    )
                continue
            return await self._read(str(current), response, redirected=hop > 0)
        return Refused(
            "redirects",
            f"{asked} redirected more than {egress.MAX_REDIRECTS} times; not followed further",
            url,
            egress.MAX_REDIRECTS + 1,
        )

    async def _addresses(self, host: str, port: int) -> list[egress.Address] | Failed:
        literal = egress.parse_ip(host)
        if literal is not None:
            return [literal]
        try:
            found = await self.resolver(host, port)
        except OSError as exc:
            return Failed(f"cannot resolve {host}: {exc}")
        addresses: list[egress.Address] = []
        for a in found:
            try:
                addresses.append(ipaddress.ip_address(a.split("%", 1)[0]))
            except ValueError:
                return Failed(f"cannot resolve {host}: the resolver gave {a!r}")
        return addresses or Failed(f"cannot resolve {host}: no address")

    async def _send(
        self, url: httpx.URL, addresses: list[egress.Address]
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
            except httpx.HTTPError as exc:
                return Failed(f"fetch of {url} failed: {type(exc).__name__}: {exc}")
        return Failed(f"fetch of {url} failed: {type(error).__name__}: {error}")

    async def _read(
        self, url: str, response: httpx.Response, *, redirected: bool
    ) -> Fetched | Failed:
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= self.max_bytes:
                    break
        except httpx.HTTPError as exc:
            return Failed(f"fetch of {url} failed: {type(exc).__name__}: {exc}")
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
    """A refusal of a redirect hop says where the redirect came from."""
    if refused.hop == 0:
        return refused
    where = f"{asked} redirects (hop {refused.hop}) to {refused.url}; "
    return Refused(refused.reason, where + refused.message, refused.url, refused.hop)


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
