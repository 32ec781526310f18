"""Screening text before it becomes durable memory: clean, redacted, or refused.

What the agent reads back every turn (identity entries) or on demand (notes, pages) is
written to disk and sent to the inference server again and again, so no secret may enter
it in clear. Every writer of durable memory takes a ``Screened``, which only ``screen``
makes: a caller cannot forget the scan. Two policies:

- ``refuse`` (the owner at the command line): a secret stops the write with
  ``SecretInInputError``, naming the line, the rule and the fingerprint; the owner still
  has the text and decides (leave it out, ``--redact``, or allow the fingerprint).
- ``redact`` (the agent's tools, and the owner's ``--redact``): each secret is replaced by
  ``[REDACTED:<rule>]`` and the counts say so. The agent cannot be asked, and what it
  writes comes from a conversation whose log still holds the original.

Pure: the allow-list is passed in (``tether.scan.allow`` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tether.errors import SecretInInputError
from tether.scan.secrets import redact

OnSecret = Literal["refuse", "redact"]


@dataclass(frozen=True)
class Screened:
    """Text that went through ``screen``: ``text`` holds no secret outside the
    allow-list; ``redacted`` counts the secrets replaced, per rule."""

    text: str
    redacted: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.redacted.values())

    def note(self) -> str:
        """What was redacted, for a message ("" when nothing was)."""
        if not self.redacted:
            return ""
        rules = ", ".join(self.redacted)
        word = "secret" if self.total == 1 else "secrets"
        return f"{self.total} {word} redacted ({rules})"


def screen(
    text: str,
    *,
    what: str,
    allow: frozenset[str],
    on_secret: OnSecret,
    allow_file: str = ".tether-scan-allow",
) -> Screened:
    """``text`` checked for secrets: as it is when clean, else refused or redacted.

    ``what`` names the text in an error ("note", "page people/ada (notes.md)");
    ``allow_file`` is where the error tells the owner to allow a fingerprint.
    """
    found = redact(text, allow=allow)
    if not found.findings:
        return Screened(text)
    if on_secret == "redact":
        return Screened(found.text, dict(found.counts))
    first = found.findings[0]
    raise SecretInInputError(
        what,
        line=text.count("\n", 0, first.start) + 1,
        rule=first.rule,
        fingerprint=first.fingerprint_in(text),
        found=len(found.findings),
        allow_file=allow_file,
    )
