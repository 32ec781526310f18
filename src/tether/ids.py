"""Identifiers and their grammars."""

from __future__ import annotations

import re

from tether.errors import InvalidIdError

SESSION_ID_GRAMMAR = "1 to 64 characters of a-z, 0-9 and '-'"
_SESSION_ID = re.compile(r"[a-z0-9-]{1,64}")


def is_session_id(value: str) -> bool:
    return _SESSION_ID.fullmatch(value) is not None


def session_id(value: str) -> str:
    """Return ``value`` if it is a valid session id, else raise InvalidIdError."""
    if not is_session_id(value):
        raise InvalidIdError("session id", value, SESSION_ID_GRAMMAR)
    return value
