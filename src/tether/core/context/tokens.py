"""A deterministic token counter, used for budgets and by the protocol fake.

Real tokenizers differ per model; tether only needs a stable, documented estimate that is
never far below the truth for English prose and code. A piece is an optional single space
followed by up to four word characters, or an optional single space and one other
character, or a run of whitespace. That gives about one piece per four characters of
prose, close to BPE tokenizers of the llama family (calibrated against llama-server's
``/tokenize`` where one is present), and the pieces concatenate back to the input.
"""

from __future__ import annotations

import re

_PIECE = re.compile(r"\s?\w{1,4}|\s?[^\w\s]|\s+")


def pieces(text: str) -> list[str]:
    """Split ``text`` into token pieces; ``"".join(pieces(t)) == t``."""
    return _PIECE.findall(text)


def count(text: str) -> int:
    """Number of token pieces in ``text``."""
    return sum(1 for _ in _PIECE.finditer(text))


def truncate(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` pieces."""
    if max_tokens <= 0:
        return ""
    end = 0
    for i, match in enumerate(_PIECE.finditer(text)):
        if i >= max_tokens:
            break
        end = match.end()
    return text[:end]
