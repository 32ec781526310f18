"""The page's logins: a one-time token printed with the URL, then a cookie session.

Both are random, shown once, and kept only as SHA-256 hashes in ``<home>/ui/auth.json``
(0600, written through a rename under a lock), so reading the home gives no way in. This
store is the page's alone: the MCP server's tokens live elsewhere. The CSRF token of a
session is an HMAC of the session's secret: the server recomputes it from the cookie and
never stores it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from tether.errors import TetherError
from tether.files import read_home_bytes, write_atomic

UI_DIR = "ui"
AUTH_FILE = "auth.json"
#: How long a printed login URL works (once).
LOGIN_TTL = timedelta(minutes=15)
#: How long a browser stays logged in.
SESSION_TTL = timedelta(hours=12)
COOKIE = "tether_ui"


class _Grant(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    hash: str
    expires: datetime


class _Auth(msgspec.Struct, forbid_unknown_fields=True):
    logins: list[_Grant] = msgspec.field(default_factory=list)
    sessions: list[_Grant] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(_Auth)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class UiAuth:
    """The login tokens and sessions of one home's page."""

    def __init__(self, home: Path) -> None:
        self.dir = home / UI_DIR
        self.path = self.dir / AUTH_FILE

    @contextlib.contextmanager
    def _locked(self) -> Iterator[_Auth]:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.dir / ".auth.lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            yield self._read()

    def _read(self) -> _Auth:
        try:
            data = read_home_bytes(self.path)
        except FileNotFoundError:
            return _Auth()
        try:
            return _decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise TetherError(
                f"{self.path}: unreadable ({exc}); delete it and log in again"
            ) from None

    def _write(self, auth: _Auth) -> None:
        write_atomic(self.path, msgspec.json.encode(auth), mode=0o600)

    @staticmethod
    def _live(grants: list[_Grant], now: datetime) -> list[_Grant]:
        return [g for g in grants if g.expires > now]

    def issue_login(self, now: datetime) -> str:
        """A new one-time login token (its hash stored; the token itself only returned)."""
        token = secrets.token_urlsafe(32)
        with self._locked() as auth:
            auth.logins = [*self._live(auth.logins, now), _Grant(_hash(token), now + LOGIN_TTL)]
            auth.sessions = self._live(auth.sessions, now)
            self._write(auth)
        return token

    def redeem(self, token: str, now: datetime) -> str | None:
        """A new session's secret for a valid, unused login token (used up now), else None."""
        wanted = _hash(token)
        with self._locked() as auth:
            live = self._live(auth.logins, now)
            match = [g for g in live if hmac.compare_digest(g.hash, wanted)]
            if not match:
                return None
            session = secrets.token_urlsafe(32)
            auth.logins = [g for g in live if g not in match]
            auth.sessions = [
                *self._live(auth.sessions, now),
                _Grant(_hash(session), now + SESSION_TTL),
            ]
            self._write(auth)
        return session

    def valid(self, session: str | None, now: datetime) -> bool:
        """True for the secret of a live session."""
        if not session:
            return False
        wanted = _hash(session)
        return any(
            hmac.compare_digest(g.hash, wanted) and g.expires > now for g in self._read().sessions
        )

    def logout(self, session: str) -> None:
        wanted = _hash(session)
        with self._locked() as auth:
            auth.sessions = [g for g in auth.sessions if g.hash != wanted]
            self._write(auth)


def csrf_token(session: str) -> str:
    """The CSRF token of a session: derived from its secret, so never stored."""
    return hmac.new(session.encode(), b"tether-ui-csrf", hashlib.sha256).hexdigest()


def csrf_ok(session: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(csrf_token(session), given)
