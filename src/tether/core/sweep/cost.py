"""The sweep's cost gate: the ceiling of one owner-day's model pass, before any call.

The ceiling is what the pass could use at most, in tokens and in money:

- each session-day digest still to make: its instructions and the raw text it will read
  (counted), plus its reply bound;
- phase A: its instructions and the spine, plus its reply bound;
- phase B: its instructions, the spine again, the full excerpt budget (8 excerpts at
  ``excerpt_chars``), the clamped model-controlled additions (phase A's reply, re-sent),
  plus the page's reply bound.

Text in hand is counted with ``core.context.tokens``; a bound given in characters (the spine cut,
the excerpt budget) counts ``ceil(chars / CHARS_PER_TOKEN)``, which stays above the
counter for prose. Priced with ``[sweep] model_usd_per_mtok_in`` / ``_out``; it must fit
both ``max_model_tokens`` and ``max_model_cost_usd``, or the day stays incomplete with
``cost_ceiling`` and no request is made. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from tether.core.context import tokens

#: Characters a token is counted as when only a character bound is known.
CHARS_PER_TOKEN = 3
#: The chat template's tokens per message (markers and the role line), counted high.
PER_MESSAGE = 8
MTOK = 1_000_000


def char_tokens(chars: int) -> int:
    return -(-max(chars, 0) // CHARS_PER_TOKEN)


class Ceiling(msgspec.Struct, frozen=True, kw_only=True):
    """The most the day's pass could use: requests, prompt and reply tokens, money."""

    requests: int
    tokens_in: int
    tokens_out: int
    usd: float

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


class PassShape(msgspec.Struct, frozen=True, kw_only=True):
    """What the day's pass will send. ``digest_inputs``: the raw text of each digest
    still to make; ``spine_chars``: the spine's bound (what is known of it plus each
    digest's reply bound, at most ``[sweep] spine_chars``)."""

    digest_inputs: tuple[str, ...]
    digest_prompt: str
    digest_reply_tokens: int
    spine_chars: int
    phase_a_prompt: str
    phase_a_reply_tokens: int
    phase_b_prompt: str
    excerpts: int
    excerpt_chars: int
    page_reply_tokens: int


def ceiling(shape: PassShape, *, usd_per_mtok_in: float, usd_per_mtok_out: float) -> Ceiling:
    digest_in = sum(
        tokens.count(shape.digest_prompt) + tokens.count(text) + 2 * PER_MESSAGE
        for text in shape.digest_inputs
    )
    digest_out = shape.digest_reply_tokens * len(shape.digest_inputs)
    spine = char_tokens(shape.spine_chars)
    a_in = tokens.count(shape.phase_a_prompt) + spine + 2 * PER_MESSAGE
    b_in = (
        tokens.count(shape.phase_b_prompt)
        + spine
        + shape.excerpts * char_tokens(shape.excerpt_chars)
        + shape.phase_a_reply_tokens  # phase A's reply, sent back: clamped by its bound
        + 4 * PER_MESSAGE
    )
    tokens_in = digest_in + a_in + b_in
    tokens_out = digest_out + shape.phase_a_reply_tokens + shape.page_reply_tokens
    usd = tokens_in * usd_per_mtok_in / MTOK + tokens_out * usd_per_mtok_out / MTOK
    return Ceiling(
        requests=len(shape.digest_inputs) + 2,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usd=usd,
    )


def fits(ceiling: Ceiling, *, max_tokens: int, max_usd: float) -> bool:
    return ceiling.tokens <= max_tokens and ceiling.usd <= max_usd


def spent(usages: Sequence[tuple[int, int, int]], *, in_: float, out: float) -> float:
    """The money of calls already made, from (cache_n, prompt_n, predicted_n) each."""
    return sum(((c + p) * in_ + o * out) / MTOK for c, p, o in usages)
