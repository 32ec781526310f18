"""What may not leave the home in a compiled view: secrets, personal data, and what the
owner's blocklist names. Pure: the allow-list and blocklist are passed in.

Personal data is found by shape, each shape checked the way its issuer checks it, so
prose with numbers in it is not flagged: an email address; a phone number written as
one (``+`` and a country code, or the North American ``(555) 123-4567`` form); a payment
card number (13 to 19 digits that pass the Luhn check); an IBAN (country, check digits
and account, 15 to 34 characters, passing the ISO 7064 mod-97 check); a US social
security number (``123-45-6789`` outside the ranges never issued).

The blocklist (``<home>/.tether-scan-blocklist``) has one entry a line: a word or phrase,
matched case-insensitively as whole words, or ``re:`` and a Python regular expression;
``#`` starts a comment line. A reviewed false positive of any family is allowed by its
fingerprint in ``.tether-scan-allow`` (the SHA-256 of the matched text), as for secrets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tether.errors import BlocklistError
from tether.scan.secrets import fingerprint, scan


@dataclass(frozen=True)
class Sensitive:
    """The first thing found: its rule (``email``, ``openai-key``, ``blocklist:3``...) and
    the fingerprint that would allow it. Holds no part of the text."""

    rule: str
    fingerprint: str


@dataclass(frozen=True)
class Blocklist:
    """The owner's blocklist: (line number, compiled pattern) pairs."""

    patterns: tuple[tuple[int, re.Pattern[str]], ...] = ()


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
    r"|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}|\d{3}[.-]\d{3}[.-]\d{4})(?![\w])"
)
_CARD = re.compile(r"(?<![\w.-])\d(?:[ -]?\d){12,18}(?![\w])")
_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![\w])")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_ok(text: str) -> bool:
    """ISO 13616: 15 to 34 characters; moved to the end, letters as 10..35, mod 97 is 1."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _phone_ok(text: str) -> bool:
    return 8 <= sum(ch.isdigit() for ch in text) <= 15


def _card_ok(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and _luhn(digits) and len(set(digits)) > 1


_PERSONAL: tuple[tuple[str, re.Pattern[str], Callable[[str], bool] | None], ...] = (
    ("email", _EMAIL, None),
    ("payment-card", _CARD, _card_ok),
    ("iban", _IBAN, _iban_ok),
    ("us-ssn", _SSN, None),
    ("phone", _PHONE, _phone_ok),
)


def _personal(text: str) -> Iterator[tuple[str, str]]:
    for rule, pattern, check in _PERSONAL:
        for m in pattern.finditer(text):
            if check is None or check(m.group()):
                yield rule, m.group()


def _blocked(text: str, blocklist: Blocklist) -> Iterator[tuple[str, str]]:
    for line, pattern in blocklist.patterns:
        for m in pattern.finditer(text):
            if m.group():
                yield f"blocklist:{line}", m.group()


def first_sensitive(text: str, *, allow: frozenset[str], blocklist: Blocklist) -> Sensitive | None:
    """The first secret, personal datum or blocked term in ``text`` that ``allow`` does
    not allow (secrets first, then personal data, then the blocklist), or None."""
    for finding in scan(text, allow=allow):
        return Sensitive(finding.rule, finding.fingerprint_in(text))
    for rule, found in (*_personal(text), *_blocked(text, blocklist)):
        mark = fingerprint(found)
        if mark not in allow:
            return Sensitive(rule, mark)
    return None


def parse_blocklist(content: str, *, source: str) -> Blocklist:
    """A blocklist file's patterns; a bad ``re:`` line is an error naming the line."""
    out: list[tuple[int, re.Pattern[str]]] = []
    for n, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("re:"):
            try:
                pattern = re.compile(line[3:].strip(), re.IGNORECASE)
            except re.error as exc:
                raise BlocklistError(source, n, f"not a regular expression: {exc}") from None
            if pattern.search("") is not None:
                raise BlocklistError(source, n, "the expression matches empty text")
        else:
            words = r"\s+".join(re.escape(w) for w in line.split())
            pattern = re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)
        out.append((n, pattern))
    return Blocklist(tuple(out))
