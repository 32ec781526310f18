"""The bearer tokens of ``tether mcp --http``: ``<home>/mcp/tokens``, stored hashed.

A token is ``tmcp_`` and 43 URL-safe characters (32 random bytes); ``create`` shows it
once and keeps only its SHA-256 (a token is random, so a fast hash is enough: there is
nothing to guess), with an id (``t-`` and 8 hex digits) that names it in ``list``,
``revoke`` and the journal, a name and a creation time. The file is one JSON document,
rewritten atomically (0600) under a lock on ``<home>/mcp/tokens.lock``; a running server
re-reads it when it changes, so a revoked token is refused from its next request on.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from tether.errors import BadInputError, NotFoundError, SecretInInputError
from tether.files import locked, read_home_bytes, write_atomic
from tether.records import UtcTime
from tether.scan.allow import home_allow
from tether.scan.screen import screen

MCP_DIR = "mcp"
TOKENS_FILE = "tokens"
TOKEN_PREFIX = "tmcp_"
#: The longest token name, in characters.
MAX_NAME_CHARS = 64


class TokenFileError(BadInputError):
    """``<home>/mcp/tokens`` cannot be read as tether wrote it: every request is refused
    until it is fixed or removed (file, problem)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem} (remove it and create new tokens)")


class TokenRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    name: str
    sha256: str
    created: UtcTime


class _TokenFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    tokens: tuple[TokenRecord, ...] = ()


_decoder = msgspec.json.Decoder(_TokenFile)


def tokens_path(home: Path) -> Path:
    return home / MCP_DIR / TOKENS_FILE


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _read(path: Path) -> tuple[TokenRecord, ...]:
    try:
        data = read_home_bytes(path)
    except FileNotFoundError:
        return ()
    try:
        parsed = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise TokenFileError(path, f"not a token file ({exc})") from None
    if parsed.version != 1:
        raise TokenFileError(path, f"version {parsed.version}, this tether reads 1")
    return parsed.tokens


def _write(path: Path, records: tuple[TokenRecord, ...]) -> None:
    write_atomic(path, msgspec.json.encode(_TokenFile(version=1, tokens=records)) + b"\n")


def _lock(home: Path) -> Path:
    lock = home / MCP_DIR / "tokens.lock"
    lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock.touch(mode=0o600, exist_ok=True)
    return lock


def list_tokens(home: Path) -> list[TokenRecord]:
    return list(_read(tokens_path(home)))


def create_token(home: Path, name: str, *, time: datetime) -> tuple[str, TokenRecord]:
    """A new token (shown once) and its record, stored hashed."""
    name = name.strip()
    if len(name) > MAX_NAME_CHARS or any(not ch.isprintable() for ch in name):
        raise BadInputError(
            f"a token name is at most {MAX_NAME_CHARS} printable characters (got {len(name)})"
        )
    # The name is kept in clear and listed: a key pasted as a name is refused (exit 2).
    try:
        name = screen(name, what="token name", allow=home_allow(home), on_secret="refuse").text
    except SecretInInputError as exc:
        raise BadInputError(
            f"the token name holds a secret (rule {exc.rule}, fingerprint {exc.fingerprint}); "
            "nothing was written. A name is listed in clear: choose one that holds none"
        ) from None
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    path = tokens_path(home)
    with locked(_lock(home)):
        records = _read(path)
        taken = {r.id for r in records}
        tid = f"t-{secrets.token_hex(4)}"
        while tid in taken:
            tid = f"t-{secrets.token_hex(4)}"
        record = TokenRecord(id=tid, name=name, sha256=_digest(token), created=time)
        _write(path, (*records, record))
    return token, record


def revoke_token(home: Path, token_id: str) -> TokenRecord:
    """Remove the token ``token_id``; NotFoundError when there is none."""
    path = tokens_path(home)
    with locked(_lock(home)):
        records = _read(path)
        gone = next((r for r in records if r.id == token_id), None)
        if gone is None:
            raise NotFoundError(f"no MCP token {token_id!r} (see `tether mcp token list`)")
        _write(path, tuple(r for r in records if r.id != token_id))
    return gone


@dataclass
class TokenCheck:
    """What the HTTP server checks every request's bearer token against: the token file,
    re-read whenever it changes (size, mtime or inode)."""

    home: Path
    _stamp: tuple[int, int, int] | None = None
    _records: tuple[TokenRecord, ...] = ()

    def _current(self) -> tuple[TokenRecord, ...]:
        path = tokens_path(self.home)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._stamp, self._records = None, ()
            return ()
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            self._records = _read(path)
            self._stamp = stamp
        return self._records

    def verify(self, token: str) -> TokenRecord | None:
        """The record of ``token``, or None when it is not a live token."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        digest = _digest(token)
        found = None
        for r in self._current():
            if hmac.compare_digest(r.sha256, digest):
                found = r
        return found
