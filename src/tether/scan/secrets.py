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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tether.errors import AllowListError

MARKER_PREFIX = "[REDACTED:"
_MARKER_PREFIX = MARKER_PREFIX.encode()


def marker(rule: str) -> str:
    """The text that replaces a secret found by ``rule``."""
    return f"{MARKER_PREFIX}{rule}]"


def fingerprint(secret: str | bytes) -> str:
    """The allow-list fingerprint of a secret: hex SHA-256 of its UTF-8 bytes."""
    data = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector.

    ``pattern`` is searched through the text, or, when ``key`` is set, matched only where
    one of the ``key`` patterns (run over the reversed, lowered text, see the module
    docstring) ends: at the start of a key name. The secret is the first of ``groups``
    that took part in the match (0 is the whole match), extended ``back`` bytes to the
    left; ``reject`` turns a hit down (placeholders, prose). After a turned-down match the
    search goes on from the end of group ``resume`` (default: the end of the match), for a
    rule whose match may swallow the start of a real secret.
    """

    id: str
    pattern: re.Pattern[bytes]
    groups: tuple[int, ...] = (0,)
    key: tuple[re.Pattern[bytes], ...] = ()
    back: int = 0
    reject: Callable[[bytes], bool] | None = None
    resume: int = 0


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


# -- rejection predicates ---------------------------------------------------------------

_PLACEHOLDER = re.compile(rb"\$\{[^}]*\}|\{\{.*\}\}|<[^<>]*>|\*+|\s*")
_OPENAI_STRUCTURED = (b"sk-proj-", b"sk-svcacct-", b"sk-admin-")


def _openai_reject(secret: bytes) -> bool:
    """A bare ``sk-`` key is random base62: turn down hyphenated words (``sk-some-name``).

    A run holding a structured key anywhere is kept whole: the search does not look
    inside a turned-down run again (that would be quadratic), and only a structured key
    could pass inside a run that fails as a whole.
    """
    if any(prefix in secret for prefix in _OPENAI_STRUCTURED):
        return False
    body = secret[3:]
    return not (
        re.search(rb"[0-9]", body) and re.search(rb"[A-Z]", body) and re.search(rb"[a-z]", body)
    )


def _slack_reject(secret: bytes) -> bool:
    """Slack tokens carry numeric team/user ids; a token of letters only is prose."""
    return re.search(rb"[0-9]", secret) is None


def _jwt_reject(secret: bytes) -> bool:
    """Header ``eyJ...`` (base64url of '{"'), payload, signature; JWE adds two parts. An
    unsigned token (empty signature) counts when its payload is JSON (``eyJ``) too."""
    parts = secret.split(b".")
    if len(parts) < 3 or len(parts[0]) < 11:
        return True
    payload, signature = parts[1], parts[2]
    if payload.startswith(b"eyJ"):
        return False
    return len(payload) < 8 or len(signature) < 8


def _value_reject(secret: bytes) -> bool:
    """Placeholders (``${VAR}``, ``{{var}}``, ``<your-key>``, ``***``, blanks) and values
    already holding a redaction marker are not secrets."""
    return _PLACEHOLDER.fullmatch(secret) is not None or _MARKER_PREFIX in secret


# -- the rules, most specific first -----------------------------------------------------


def _key_finders(reversed_key: bytes) -> tuple[re.Pattern[bytes], ...]:
    """Patterns over the reversed, lowered text: from an operator's first byte (``:`` of
    ``:`` / ``:=``, ``=`` of ``=`` / ``=>``), back over blanks and an optional (escaped)
    closing quote, to the start of a key name spelled backwards by ``reversed_key``. One
    pattern per operator, so each starts with a literal byte ``re`` can skip to."""
    tail = rb"""[ \t]*(?:["']\\?)?(?:""" + reversed_key + rb")"
    return (re.compile(b":" + tail), re.compile(b"=" + tail))


_ASSIGN = rb"""(?:\\?["'])?[ \t]*(?::=|=>|[:=])[ \t]*"""
_QUOTED = rb"""(?:
      \\"((?:[^"\\\r\n]|\\\\\\"|\\\\|\\[^"\\\r\n])+)\\"   # inside a JSON string: \"value\"
    | "((?:[^"\\\r\n]|\\.)+)"
    | '((?:[^'\\\r\n]|\\.)+)'
)"""

RULES: tuple[Rule, ...] = (
    Rule(
        "pem-private-key",
        # Whole armoured block, newlines real or JSON-escaped. Without an END line (a window
        # cut mid-key) the block runs over every following base64 or header line.
        re.compile(
            rb"""-----BEGIN[ A-Z0-9]{0,40}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----
            (?:
                (?:(?!-----BEGIN)[\s\S]){0,65536}?   # lazily, never across another BEGIN
                -----END[ A-Z0-9]{0,40}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----
              | (?:(?:\r?\n|\\r\\n|\\n)[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:[^\r\n\\]*)[ \t]*
                   (?=\r?\n|\\[rn]|["',\]}]|\Z))*
            )""",
            re.VERBOSE,
        ),
    ),
    Rule("anthropic-key", re.compile(rb"k(?<=sk)-ant-[A-Za-z0-9_-]{20,}"), back=1),
    Rule(
        "openai-key",
        re.compile(rb"k(?<=sk)-(?!ant-)(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,}"),
        back=1,
        reject=_openai_reject,
    ),
    Rule("github-token", re.compile(rb"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}")),
    Rule(
        "slack-token",
        re.compile(rb"xox[abeprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,}"),
        reject=_slack_reject,
    ),
    Rule("stripe-key", re.compile(rb"k(?<=[sr]k)_(?:live|test)_[A-Za-z0-9]{16,}"), back=1),
    Rule("stripe-key", re.compile(rb"whsec_[A-Za-z0-9]{24,}")),
    Rule("aws-access-key", re.compile(rb"A(?:KIA|SIA)[A-Z0-9]{16,}")),
    Rule(
        "aws-secret-key",
        re.compile(
            rb"aws[ _.-]?secret[ _.-]?(?:access[ _.-]?)?key" + _ASSIGN + rb"""(?:\\?["'])?"""
            rb"([A-Za-z0-9/+=]{40,})",
            re.IGNORECASE,
        ),
        groups=(1,),
        key=_key_finders(rb"yek(?:[ _.-]?ssecca)?[ _.-]?terces[ _.-]?swa"),
    ),
    Rule(
        "jwt",
        # The whole dotted base64url run after eyJ, possessively: a header run that is no
        # JWT is consumed once and turned down by _jwt_reject, never re-scanned from each
        # J in it (a later start in the header would be a shorter header with the same
        # parts). The search resumes after the header, since a JWT may start in a part.
        re.compile(
            rb"J(?<=eyJ)([A-Za-z0-9_-]*+)"
            rb"(?:\.[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]++){0,2}+)?)?"
        ),
        back=2,
        reject=_jwt_reject,
        resume=1,
    ),
    Rule(
        "password-assignment",
        # The key name is kept (and may carry any prefix: DB_PASSWORD, clientSecret); only
        # the quoted, non-empty value is the secret.
        re.compile(
            rb"(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_.-]?key)"
            rb"(?:[_.-]?(?:access[_.-]?)?key|[_.-]?(?:value|str|string|text|hash))?"
            + _ASSIGN
            + _QUOTED,
            re.IGNORECASE | re.VERBOSE,
        ),
        groups=(1, 2, 3),
        # The same key name spelled backwards: suffix, then keyword.
        key=_key_finders(
            rb"(?:yek(?:[_.-]?ssecca)?[_.-]?|(?:eulav|rts|gnirts|txet|hsah)[_.-]?)?"
            rb"(?:d(?:ro)?wssap|esarhpssap|dwp|terces|nekot|yek[_.-]?ipa)"
        ),
        reject=_value_reject,
    ),
)

#: Rule ids, in order of specificity (a rule may have several patterns).
RULE_IDS: tuple[str, ...] = tuple(dict.fromkeys(r.id for r in RULES))
_RANK = {rid: n for n, rid in enumerate(RULE_IDS)}


# -- engine -----------------------------------------------------------------------------


def _hits(data: bytes, allow: frozenset[str]) -> tuple[list[tuple[int, int, int]], int]:
    """Every (start, end, rank) hit in ``data`` (byte offsets), and how many were allowed."""
    hits: list[tuple[int, int, int]] = []
    allowed = 0
    backwards: bytes | None = None

    def take(m: re.Match[bytes], rule: Rule) -> bool:
        """Record the hit of ``m``; False when the rule turned it down."""
        nonlocal allowed
        for g in rule.groups:
            start, end = m.span(g)
            if start >= 0:
                break
        start -= rule.back
        secret = data[start:end]
        if rule.reject is not None and rule.reject(secret):
            return False
        if allow and fingerprint(secret) in allow:
            allowed += 1
        else:
            hits.append((start, end, _RANK[rule.id]))
        return True

    for rule in RULES:
        if not rule.key:
            search = rule.pattern.search
            pos = 0
            while (m := search(data, pos)) is not None:
                pos = m.end() if take(m, rule) else m.end(rule.resume)
            continue
        if backwards is None:
            backwards = data.lower()[::-1]
        size = len(data)
        for finder in rule.key:
            for k in finder.finditer(backwards):
                found = rule.pattern.match(data, size - k.end())
                if found is not None:
                    take(found, rule)
    return hits, allowed


def _merge(hits: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Union overlapping spans; label each union by its longest hit, then by rank."""
    hits.sort(key=lambda h: (h[0], -h[1], h[2]))
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
    hits, _ = _hits(_SEPARATOR.join(encoded), allow)
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
