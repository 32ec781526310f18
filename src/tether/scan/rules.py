"""The secret rules: a compiled, gitleaks-style rule set. Pure: no I/O.

``tether.scan.secrets`` runs them (and says why they are written the way they are: anchored
on a rare literal byte, key names read backwards from the operator, every repetition
capped so that one match attempt reads at most ``LONGEST_MATCH`` bytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MARKER_PREFIX = "[REDACTED:"
_MARKER_PREFIX = MARKER_PREFIX.encode()


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

    ``tail``, matched where the secret ends, extends it over the rest of a run longer than
    the pattern's cap. ``closed`` names a group that ends a delimited secret: when it took
    no part, the secret runs to the next ``-----BEGIN`` (or the end of the text).
    """

    id: str
    pattern: re.Pattern[bytes]
    groups: tuple[int, ...] = (0,)
    key: tuple[re.Pattern[bytes], ...] = ()
    back: int = 0
    reject: Callable[[bytes], bool] | None = None
    resume: int = 0
    tail: re.Pattern[bytes] | None = None
    closed: str = ""


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


#: Unquoted values that are words of code or config, not passwords (lowered).
_NOT_A_PASSWORD = frozenset(
    b"none null nil true false yes no on off str bytes string int bool required optional "
    b"empty unset undefined default secret password passwd pass pw pwd changeme n/a na "
    b"- -- tbd todo xxx redacted hidden masked".split()
)
_CODE_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _plain_password_reject(secret: bytes) -> bool:
    """An unquoted value after ``password =``: turn down placeholders, words of code
    (``None``, ``str``), names (``self.password``, ``os.environ``) and variables."""
    return (
        _value_reject(secret)
        or secret.lower() in _NOT_A_PASSWORD
        or secret.startswith((b"$", b"%", b"//", b"&", b"*"))
        or secret.endswith((b":", b"=", b">"))  # a label or another key, not a value
        or _CODE_NAME.fullmatch(secret) is not None
    )


def _prose_password_reject(secret: bytes) -> bool:
    """After ``password:`` (prose, YAML, a log line) a word is more often prose
    ("password: see the vault", "Username and password: You can") than a password:
    those need a digit, a capital inside or a sign."""
    return _plain_password_reject(secret) or re.fullmatch(rb"[A-Za-z][a-z]*", secret) is not None


# -- the rules, most specific first -----------------------------------------------------

# Caps on every repetition (see the module docstring). Each is far above the real format:
# vendor tokens are under 200 characters, a JWT part a few KiB, an RSA-8192 PEM about 6.5 KiB.
_RUN = 1024  # a vendor token's run, before its tail
_PART = 8192  # one dotted part of a JWT
_VALUE = 4096  # a quoted value's characters (an escape is up to 4 bytes)
_BLANKS = 64  # blanks around an assignment operator
_PEM_BODY = 16384  # BEGIN to END of a private-key block
_ARMOUR = 10 + 40 + len("PRIVATE KEY BLOCK-----")
#: The longest match any rule can make (a five-part JWT is the longest), in bytes.
LONGEST_MATCH = max(3 + 5 * (_PART + 1), 2 * _ARMOUR + _PEM_BODY, 64 + 4 * _BLANKS + 4 * _VALUE)


def _run_tail(cls: bytes) -> re.Pattern[bytes]:
    return re.compile(b"[" + cls + b"]*+")


def _capped(cls: bytes, least: int) -> bytes:
    return b"[" + cls + b"]{" + str(least).encode() + b"," + str(_RUN).encode() + b"}"


def _key_finders(reversed_key: bytes) -> tuple[re.Pattern[bytes], ...]:
    """Patterns over the reversed, lowered text: from an operator's first byte (``:`` of
    ``:`` / ``:=``, ``=`` of ``=`` / ``=>``), back over blanks and an optional (escaped)
    closing quote, to the start of a key name spelled backwards by ``reversed_key``. One
    pattern per operator, so each starts with a literal byte ``re`` can skip to."""
    tail = rb"[ \t]{0,%d}" % _BLANKS + rb"""(?:["']\\?)?(?:""" + reversed_key + rb")"
    return (re.compile(b":" + tail), re.compile(b"=" + tail))


_ASSIGN = rb"""(?:\\?["'])?[ \t]{0,%d}(?::=|=>|[:=])[ \t]{0,%d}""" % (_BLANKS, _BLANKS)
_QUOTED = rb"""(?:
      \\"((?:[^"\\\r\n]|\\\\\\"|\\\\|\\[^"\\\r\n]){1,%d})\\"   # inside a JSON string: \"value\"
    | "((?:[^"\\\r\n]|\\.){1,%d})"
    | '((?:[^'\\\r\n]|\\.){1,%d})'
)""" % (_VALUE, _VALUE, _VALUE)

RULES: tuple[Rule, ...] = (
    Rule(
        "pem-private-key",
        # Whole armoured block, newlines real or JSON-escaped, lazily to its END line but
        # never across another BEGIN. Without an END within _PEM_BODY (a window cut
        # mid-key) group "end" takes no part and the block runs on (``closed``).
        re.compile(
            rb"""-----BEGIN[ A-Z0-9]{0,40}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----
            (?:
                (?:(?!-----BEGIN)[\s\S]){0,%d}?
                (?P<end>-----END[ A-Z0-9]{0,40}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----)
            )?"""
            % _PEM_BODY,
            re.VERBOSE,
        ),
        closed="end",
    ),
    Rule(
        "anthropic-key",
        re.compile(rb"k(?<=sk)-ant-" + _capped(rb"A-Za-z0-9_-", 20)),
        back=1,
        tail=_run_tail(rb"A-Za-z0-9_-"),
    ),
    Rule(
        "openai-key",
        re.compile(
            rb"k(?<=sk)-(?!ant-)(?:(?:proj|svcacct|admin)-)?" + _capped(rb"A-Za-z0-9_-", 20)
        ),
        back=1,
        reject=_openai_reject,
        tail=_run_tail(rb"A-Za-z0-9_-"),
    ),
    Rule(
        "github-token",
        # One pattern (one pass over the text) for both forms; a classic token glued to
        # a "_word" is redacted with it (the tail allows the fine-grained form's "_").
        re.compile(
            rb"gh[pousr]_"
            + _capped(rb"A-Za-z0-9", 36)
            + rb"|github_pat_"
            + _capped(rb"A-Za-z0-9_", 22)
        ),
        tail=_run_tail(rb"A-Za-z0-9_"),
    ),
    Rule(
        "slack-token",
        re.compile(
            rb"(?:xox[abeprs]-|xapp-[0-9]{1,32}-)" + _capped(rb"A-Za-z0-9-", 10),
        ),
        reject=_slack_reject,
        tail=_run_tail(rb"A-Za-z0-9-"),
    ),
    Rule(
        "stripe-key",
        re.compile(rb"k(?<=[sr]k)_(?:live|test)_" + _capped(rb"A-Za-z0-9", 16)),
        back=1,
        tail=_run_tail(rb"A-Za-z0-9"),
    ),
    Rule(
        "stripe-key",
        re.compile(rb"whsec_" + _capped(rb"A-Za-z0-9", 24)),
        tail=_run_tail(rb"A-Za-z0-9"),
    ),
    Rule(
        "aws-access-key",
        re.compile(rb"A(?:KIA|SIA)" + _capped(rb"A-Z0-9", 16)),
        tail=_run_tail(rb"A-Z0-9"),
    ),
    Rule(
        "aws-secret-key",
        re.compile(
            rb"aws[ _.-]?secret[ _.-]?(?:access[ _.-]?)?key" + _ASSIGN + rb"""(?:\\?["'])?"""
            rb"(" + _capped(rb"A-Za-z0-9/+=", 40) + rb")",
            re.IGNORECASE,
        ),
        groups=(1,),
        key=_key_finders(rb"yek(?:[ _.-]?ssecca)?[ _.-]?terces[ _.-]?swa"),
        tail=_run_tail(rb"A-Za-z0-9/+="),
    ),
    Rule(
        "jwt",
        # The whole dotted base64url run after eyJ, possessively: a header run that is no
        # JWT is consumed once and turned down by _jwt_reject, never re-scanned from each
        # J in it (a later start in the header would be a shorter header with the same
        # parts). The search resumes after the header, since a JWT may start in a part.
        re.compile(
            rb"J(?<=eyJ)([A-Za-z0-9_-]{0,%d}+)"
            rb"(?:\.[A-Za-z0-9_-]{0,%d}+(?:\.[A-Za-z0-9_-]{0,%d}+(?:\.[A-Za-z0-9_-]{1,%d}+){0,2}+)?)?"
            % (_PART, _PART, _PART, _PART)
        ),
        back=2,
        reject=_jwt_reject,
        resume=1,
        # Only a part past its cap leaves a base64url byte right after the match.
        tail=re.compile(rb"[A-Za-z0-9_-]++(?:\.[A-Za-z0-9_-]++)*+"),
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

# Passwords written without quotes (issue 34). The key is a password word only (not
# "token" or "secret", common in prose) at the start of a name part; the value runs to a
# blank or a delimiter and must end there (``getpass()`` is code, not a value).
_PASSWORD_KEY = rb"(?:(?<![a-z])pwd?|passw(?:or)?d|passphrase)"
_PASSWORD_KEY_BACK = rb"(?:dwp|wp|d(?:ro)?wssap|esarhpssap)"
_PLAIN_VALUE = rb"""([^\s"'`,;&<>(){}\[\]\\]{1,%d})(?=[\s"'`,;&}\]]|\Z)""" % _VALUE


def _plain_key(op: bytes) -> tuple[re.Pattern[bytes], ...]:
    return (
        re.compile(
            re.escape(op) + rb"[ \t]{0,%d}" % _BLANKS + rb"""(?:["']\\?)?""" + _PASSWORD_KEY_BACK
        ),
    )


RULES = (
    *RULES,
    Rule(
        "password-assignment",
        # ``password = hunter2``, ``DB_PASSWD=x``, ``?pwd=x&``: an assignment operator.
        re.compile(
            _PASSWORD_KEY
            + rb"""(?:\\?["'])?[ \t]{0,%d}(?:=>|=)[ \t]{0,%d}""" % (_BLANKS, _BLANKS)
            + _PLAIN_VALUE,
            re.IGNORECASE,
        ),
        groups=(1,),
        key=_plain_key(b"="),
        reject=_plain_password_reject,
    ),
    Rule(
        "password-assignment",
        # ``password: Tr0ub4dor``, ``pw: 4417``: a colon, so prose words are turned down.
        re.compile(
            _PASSWORD_KEY
            + rb"""(?:\\?["'])?[ \t]{0,%d}:=?[ \t]{0,%d}""" % (_BLANKS, _BLANKS)
            + _PLAIN_VALUE,
            re.IGNORECASE,
        ),
        groups=(1,),
        key=_plain_key(b":"),
        reject=_prose_password_reject,
    ),
    Rule(
        "url-password",
        # ``postgres://user:PASSWORD@host/db``: the password of a URL's userinfo (a
        # password may hold ":"; "/", "?", "#" and "@" end it).
        re.compile(rb"://[^\s:/?#@\[\]]{0,256}:([^\s/?#@]{1,256})@"),
        groups=(1,),
        # Only placeholders are turned down: a URL's password is a password even when it
        # is a word ("postgres://u:pw@h" is a real, bad one).
        reject=_value_reject,
    ),
)

#: Rule ids, in order of specificity (a rule may have several patterns).
RULE_IDS: tuple[str, ...] = tuple(dict.fromkeys(r.id for r in RULES))
