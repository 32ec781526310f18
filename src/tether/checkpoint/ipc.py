"""The hook's one round trip to the daemon: ``POST /v1/harvest`` on ``<home>/run/tether.sock``.

The hook process must start fast, so this is HTTP/1.1 written by hand on a Unix socket
(no httpx): one request, ``Connection: close``, read to the end. The daemon's reply is
``{"outcome": CODE}``, one of ``FLUSH_CODES``; anything else (no socket, a refused
connection, a timeout, a reply we cannot read) is ``None``: no daemon answered, and the
maintenance pass will find the segment. The socket's path is defined here once; the
daemon (``daemon.api``) serves on it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Literal

RUN_DIR = "run"
SOCKET = "tether.sock"
HARVEST_PATH = "/v1/harvest"

FlushCode = Literal[
    "scheduled",
    "skip_queue_full",
    "skip_not_found",
    "skip_bad_basename",
    "skip_no_session",
    "skip_shutting_down",
    "skip_already_queued",
]
FLUSH_CODES: frozenset[str] = frozenset(FlushCode.__args__)  # type: ignore[attr-defined]


def socket_path(home: Path) -> Path:
    return home / RUN_DIR / SOCKET


def schedule_harvest(home: Path, session: str, segment: str, timeout_s: float) -> str | None:
    """Ask the daemon to harvest ``segment`` (a file name in ``corpus/``); its code, or
    None when no daemon answered within ``timeout_s``."""
    path = socket_path(home)
    if timeout_s <= 0 or not path.exists():
        return None
    body = json.dumps({"session": session, "segment": segment}).encode()
    request = (
        f"POST {HARVEST_PATH} HTTP/1.1\r\nHost: tether\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    chunks: list[bytes] = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(path))
            sock.sendall(request)
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return None
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return None
    try:
        outcome = json.loads(payload).get("outcome")
    except (ValueError, AttributeError):
        return None
    return outcome if outcome in FLUSH_CODES else None
