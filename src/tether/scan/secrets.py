"""Secret detection and redaction: a compiled, gitleaks-style rule set. Pure: no I/O.

Why our own rules: what we scan is a whole pre-compaction window (up to a few MiB) inside
a compaction that must stay fast, and what we do with a hit is redact it before anything
touches the disk. So every rule is a real credential *format* (a vendor prefix, a PEM
armour, a JWT's ``eyJ`` header, a quoted value assigned to a secret-looking key), not an
entropy guess that flags prose.

How it stays fast (measured by ``benchmarks/bank_window.py``):

- The text is scanned as UTF-8 bytes. ``re`` then moves one byte per step even when the
  text holds non-ASCII (a ``str`` with one emoji is 4 bytes a character for ``re``), and
  ``bytes.lower`` is ASCII-only, so case-folded offsets equal the original offsets.
- Every prefixed rule's pattern starts with a literal character, which ``re`` skips to with
  a single-character scan; where a vendor prefix starts with a common letter (``sk-``,
  ``eyJ``) the pattern is anchored on a rarer letter inside it and checks the letters before
  with a look-behind (``back`` says how many characters the secret starts before the match).
- The two case-insensitive assignment rules (``aws_secret_access_key = ...``,
  ``password = "..."``) have no rare letter: their keywords are common words in prose and
  a case-insensitive search tries every position. So they are found from the assignment
  operator instead: ``re`` skips to each ``:`` or ``=`` in the *reversed*, lowered bytes and
  reads the key name backwards from there (``key``); only where a key name ends right before
  an operator is the forward pattern tried. Their cost follows the number of assignments to
  secret-looking keys, not the number of times prose says "token".

How it stays bounded on hostile input (measured by ``benchmarks/secret_scan.py``): every
repetition in a rule is capped (``_RUN``, ``_PART``, ``_VALUE``, ``_BLANKS``, ``_PEM_BODY``), so
one match attempt reads at most ``LONGEST_MATCH`` bytes wherever it starts. A token run
longer than its cap is still redacted whole: the hit is extended over the rest of the run
(``tail``, a possessive character-class run, read once). The text is searched in chunks of
``CHUNK`` bytes; a search that starts in a chunk may read ``OVERLAP`` (at least
``LONGEST_MATCH``) bytes past it, so a secret across a chunk boundary is matched whole,
and the result is exactly that of one unchunked search. A private-key block with no END
line within ``_PEM_BODY`` bytes (a window cut mid-key, a pasted fragment) is redacted from
its BEGIN line to the next BEGIN armour or the end of the text: never left in clear.

Overlaps: every hit is a span; overlapping spans are merged into their union (so no part of
a secret is ever left in clear) and the union is labelled by its longest hit, ties going to
the rule listed first (the most specific). Redacting is idempotent: a marker
``[REDACTED:<rule-id>]`` matches no rule, and a quoted value holding a marker is not a
secret.

Allow-list: a reviewed false positive is allowed by its fingerprint, the lowercase hex
SHA-256 of the matched secret's UTF-8 bytes (for ``password = "x"`` that is the value
``x``, for a PEM block the whole block). ``load_allow`` parses ``.tether-scan-allow``.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tether.errors import AllowListError
from tether.scan.rules import LONGEST_MATCH, MARKER_PREFIX, RULE_IDS, RULES, Rule

__all__ = [
    "CHUNK",
    "LONGEST_MATCH",
    "MARKER_PREFIX",
    "OVERLAP",
    "RULES",
    "RULE_IDS",
    "Finding",
    "RedactedBytes",
    "Redaction",
    "Rule",
    "fingerprint",
    "load_allow",
    "marker",
    "redact",
    "redact_bytes",
    "redact_many",
    "scan",
]


def marker(rule: str) -> str:
    """The text that replaces a secret found by ``rule``."""
    return f"{MARKER_PREFIX}{rule}]"


def fingerprint(secret: str | bytes) -> str:
    """The allow-list fingerprint of a secret: hex SHA-256 of its UTF-8 bytes."""
    data = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a secret is: the rule and the span ``[start, end)`` in the scanned text.

    Deliberately holds no part of the secret, so logging or printing a finding leaks
    nothing; ``fingerprint_in`` computes the allow-list fingerprint from the text.
    """

    rule: str
    start: int
    end: int

    def fingerprint_in(self, text: str) -> str:
        return fingerprint(text[self.start : self.end])


@dataclass(frozen=True)
class Redaction:
    """The redacted text, the findings (spans in the original text) and counts per rule.

    ``allowed`` counts hits let through by the allow-list.
    """

    text: str
    findings: tuple[Finding, ...]
    counts: dict[str, int]
    allowed: int = 0

    @property
    def total(self) -> int:
        return len(self.findings)


@dataclass(frozen=True)
class RedactedBytes:
    """``redact_bytes``'s result: the redacted UTF-8, findings in *byte* offsets, counts."""

    data: bytes
    findings: tuple[Finding, ...]
    counts: dict[str, int]
    allowed: int = 0


#: Bytes one search starts in, and how far past them it may read (at least LONGEST_MATCH).
CHUNK = 1024 * 1024
OVERLAP = 64 * 1024
#: How far back from an assignment operator a key name may start (blanks, quote, name).
_KEY_SPAN = 256
_RANK = {rid: n for n, rid in enumerate(RULE_IDS)}


# -- engine -----------------------------------------------------------------------------


def _hits(
    data: bytes, allow: frozenset[str], *, stop: bytes = b"", chunk: int = CHUNK
) -> tuple[list[tuple[int, int, int]], int]:
    """Every (start, end, rank) hit in ``data`` (byte offsets), and how many were allowed.

    ``stop`` also ends an unclosed block (``redact_many``'s separator between texts);
    ``chunk`` is a parameter only so tests can cut the text anywhere.
    """
    hits: list[tuple[int, int, int]] = []
    allowed = 0
    size = len(data)

    def take(match: re.Match[bytes], rule: Rule) -> int:
        """Record the hit of ``match``; return where the search goes on."""
        nonlocal allowed
        for g in rule.groups:
            start, end = match.span(g)
            if start >= 0:
                break
        start -= rule.back
        if rule.tail is not None and (t := rule.tail.match(data, end)) is not None:
            end = t.end()
        if rule.closed and match.start(rule.closed) < 0:
            end = _block_end(data, match.end(), stop)
        secret = data[start:end]
        if rule.reject is not None and rule.reject(secret):
            return max(end, match.end()) if rule.resume == 0 else match.end(rule.resume)
        if allow and fingerprint(secret) in allow:
            allowed += 1
        else:
            hits.append((start, end, _RANK[rule.id]))
        return max(end, match.end())

    bounds = [(a, min(a + chunk, size)) for a in range(0, size, chunk)] or [(0, 0)]
    for rule in RULES:
        if not rule.key:
            # One search at a time from where the last hit left off, as over the whole text;
            # a search sees only its chunk and the overlap, and a match starting past the
            # chunk is left to the next one (it could be cut by the search's end).
            search = rule.pattern.search
            pos = 0
            for a, b in bounds:
                pos = max(pos, a)
                reach = min(b + OVERLAP, size)
                while pos < b and (m := search(data, pos, reach)) is not None and m.start() < b:
                    pos = take(m, rule)
            continue
        for a, b in bounds:
            # The operators in [a, b), read backwards with room for their key names.
            low = max(0, a - _KEY_SPAN)
            backwards = data[low:b].lower()[::-1]
            first = b - a  # reversed offsets below this are operators in [a, b)
            for finder in rule.key:
                for k in finder.finditer(backwards):
                    if k.start() >= first:
                        break
                    found = rule.pattern.match(data, b - k.end())
                    if found is not None:
                        take(found, rule)
    return hits, allowed


_BEGIN = b"-----BEGIN"


def _block_end(data: bytes, pos: int, stop: bytes) -> int:
    """Where an unclosed private-key block ends: the next BEGIN armour, ``stop``, or the end."""
    ends = [len(data), data.find(_BEGIN, pos)]
    if stop:
        ends.append(data.find(stop, pos))
    return min(e for e in ends if e >= 0)


def _merge(hits: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Union overlapping spans; label each union by its longest hit, then by rank."""
    hits.sort(key=lambda hit: (hit[0], -hit[1], hit[2]))
    out: list[list[int]] = []  # start, end, rank, length of the labelling hit
    for start, end, rank in hits:
        if out and start < out[-1][1]:
            cur = out[-1]
            cur[1] = max(cur[1], end)
            if (end - start, -rank) > (cur[3], -cur[2]):
                cur[2], cur[3] = rank, end - start
        else:
            out.append([start, end, rank, end - start])
    return [(s, e, r) for s, e, r, _ in out]


def _char_offsets(data: bytes, offsets: list[int]) -> dict[int, int]:
    """Map byte offsets (each on a character boundary) to character offsets."""
    out: dict[int, int] = {}
    chars = 0
    prev = 0
    for off in sorted(set(offsets)):
        chars += len(data[prev:off].decode())
        out[off] = chars
        prev = off
    return out


def _run(text: str, allow: frozenset[str]) -> tuple[bytes, list[tuple[int, int, int]], int]:
    data = text.encode()
    hits, allowed = _hits(data, allow)
    return data, _merge(hits), allowed


def _findings(text: str, data: bytes, spans: list[tuple[int, int, int]]) -> tuple[Finding, ...]:
    if len(data) == len(text):  # ASCII: byte offsets are character offsets
        return tuple(Finding(RULE_IDS[r], s, e) for s, e, r in spans)
    where = _char_offsets(data, [o for s, e, _ in spans for o in (s, e)])
    return tuple(Finding(RULE_IDS[r], where[s], where[e]) for s, e, r in spans)


def scan(text: str, *, allow: frozenset[str] = frozenset()) -> list[Finding]:
    """The secrets in ``text``, in order, overlaps merged (see the module docstring)."""
    data, spans, _ = _run(text, allow)
    return list(_findings(text, data, spans))


def redact(text: str, *, allow: frozenset[str] = frozenset()) -> Redaction:
    """``text`` with every secret replaced by ``[REDACTED:<rule-id>]``.

    ``allow`` holds fingerprints (see ``fingerprint``) of reviewed false positives, which
    are left as they are.
    """
    data, spans, allowed = _run(text, allow)
    if not spans:
        return Redaction(text, (), {}, allowed)
    out, counts = _apply(data, spans)
    return Redaction(out.decode(), _findings(text, data, spans), counts, allowed)


#: Between the texts of ``redact_many``: no rule matches a NUL, and the line breaks
#: around it end a text for every rule as the end of the string does.
_SEPARATOR = b"\n\x00\n"


def redact_many(texts: Sequence[str], *, allow: frozenset[str] = frozenset()) -> list[str]:
    """``[redact(t, allow=allow).text for t in texts]``, in one scan.

    The texts are scanned joined, which costs the same per byte and nothing per text (a
    short chat line costs ten times less). A text that any hit touches (or that a hit
    runs across, such as a private key block cut over two texts) is then redacted on its
    own, so the result is exactly that of redacting each text alone. Texts holding a
    NUL are redacted one by one.
    """
    if not texts:
        return []
    if any("\x00" in t for t in texts):
        return [redact(t, allow=allow).text for t in texts]
    encoded = [t.encode() for t in texts]
    starts: list[int] = []
    offset = 0
    for e in encoded:
        starts.append(offset)
        offset += len(e) + len(_SEPARATOR)
    hits, _ = _hits(_SEPARATOR.join(encoded), allow, stop=_SEPARATOR)
    touched: set[int] = set()
    for start, end, _rank in hits:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, max(start, end - 1)) - 1
        touched.update(range(max(first, 0), last + 1))
    return [redact(t, allow=allow).text if n in touched else t for n, t in enumerate(texts)]


def redact_bytes(data: bytes, *, allow: frozenset[str] = frozenset()) -> RedactedBytes:
    """``redact`` for UTF-8 bytes, with spans in byte offsets.

    For callers that write bytes anyway (banking a window): it skips decoding the result
    and mapping offsets to characters, which costs as much as the scan on non-ASCII text.
    """
    hits, allowed = _hits(data, allow)
    spans = _merge(hits)
    if not spans:
        return RedactedBytes(data, (), {}, allowed)
    out, counts = _apply(data, spans)
    findings = tuple(Finding(RULE_IDS[r], s, e) for s, e, r in spans)
    return RedactedBytes(out, findings, counts, allowed)


def _apply(data: bytes, spans: list[tuple[int, int, int]]) -> tuple[bytes, dict[str, int]]:
    pieces: list[bytes] = []
    counts: dict[str, int] = {}
    pos = 0
    for start, end, rank in spans:
        rid = RULE_IDS[rank]
        pieces.append(data[pos:start])
        pieces.append(marker(rid).encode())
        counts[rid] = counts.get(rid, 0) + 1
        pos = end
    pieces.append(data[pos:])
    return b"".join(pieces), dict(sorted(counts.items()))


_FINGERPRINT = re.compile(r"[0-9a-fA-F]{64}")


def load_allow(content: str, *, source: str = ".tether-scan-allow") -> frozenset[str]:
    """Parse an allow file: one hex SHA-256 fingerprint a line; ``#`` starts a comment.

    A line that is not a fingerprint is an error naming ``source`` and the line, rather
    than a silently ignored typo that would leave a false positive redacted forever.
    """
    out: set[str] = set()
    for n, raw in enumerate(content.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if _FINGERPRINT.fullmatch(line) is None:
            raise AllowListError(source, n, "expected a 64-hex-digit SHA-256 fingerprint")
        out.add(line.lower())
    return frozenset(out)
