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


PAGE_SLUG_GRAMMAR = (
    "1 to 128 characters: words of a-z, 0-9 and '-' joined by '/' (people/ada), "
    "not starting with 'corpus/' (compaction checkpoints live there)"
)
_PAGE_SLUG = re.compile(r"[a-z0-9-]+(?:/[a-z0-9-]+)*")


def is_page_slug(value: str) -> bool:
    return (
        len(value) <= 128
        and _PAGE_SLUG.fullmatch(value) is not None
        and not value.startswith("corpus/")
    )


def page_slug(value: str) -> str:
    """Return ``value`` if it is a valid page slug (``tether://`` in front is taken off),
    else raise InvalidIdError."""
    slug = value.removeprefix("tether://")
    if not is_page_slug(slug):
        raise InvalidIdError("page slug", value, PAGE_SLUG_GRAMMAR)
    return slug
