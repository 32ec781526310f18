"""No secret in what the sweep keeps: a day packet's candidates, redacted.

Pure helpers over ``tether.core.sweep`` records, here so that both the sweep (before it
stages a packet, again before each apply) and ``tether memory scan`` (a stage or trigger
kept in clear) use the same rules without one importing the other.

A day's packet comes from a backend that read the owner's conversations, so a fact
candidate can quote an API key the owner pasted. The runner redacts every candidate
(``scan.secrets``: a fact's text, every string of a trigger repair's condition) *before*
the packet is staged, so the durable stage, the facts, the journal and the receipts'
digests all see the same redacted candidate: the digest a receipt keeps is taken over
what was staged, and a crash followed by a retry meets the same bytes (exactly-once does
not depend on the allow-list staying the same).

A stage kept by a version that did not redact is redacted again when each candidate is
applied (redacting is idempotent, so a redacted stage passes unchanged); its digests
stay those of the stage, as its receipts expect.

Keys (source keys, subjects, entities, trigger ids, session refs) are ids, not text: one
that holds a secret cannot be redacted into a valid key, so the packet is refused
(``secret_in_key``) and nothing of that day is written.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tether.core.sweep.errors import PacketError
from tether.core.sweep.packet import Candidate, DailySweepInput, FactCandidate
from tether.scan.secrets import redact, scan


def redact_condition(value: Any, allow: frozenset[str]) -> tuple[Any, int]:
    """``value`` (a raw trigger condition) with every string redacted; keys stay."""
    if isinstance(value, str):
        r = redact(value, allow=allow)
        return r.text, r.total
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for k, v in value.items():
            out[k], n = redact_condition(v, allow)
            total += n
        return out, total
    if isinstance(value, list | tuple):
        items = [redact_condition(v, allow) for v in value]
        return type(value)(v for v, _ in items), sum(n for _, n in items)
    return value, 0


def _keys(candidate: Candidate) -> list[str]:
    keys = [candidate.source_key, *(r.session for r in candidate.refs)]
    if isinstance(candidate, FactCandidate):
        return [*keys, candidate.subject, candidate.entity]
    return [*keys, candidate.trigger_id]


def redact_candidate(candidate: Candidate, allow: frozenset[str]) -> tuple[Candidate, int]:
    """``candidate`` with its free text redacted, and how many secrets were replaced."""
    if isinstance(candidate, FactCandidate):
        r = redact(candidate.text, allow=allow)
        if not r.total:
            return candidate, 0
        return msgspec.structs.replace(candidate, text=r.text), r.total
    condition, n = redact_condition(candidate.condition, allow)
    if not n:
        return candidate, 0
    return msgspec.structs.replace(candidate, condition=condition), n


def redact_packet(packet: DailySweepInput, allow: frozenset[str]) -> tuple[DailySweepInput, int]:
    """``packet`` with every candidate redacted, and the number of secrets replaced.

    Raises PacketError(``secret_in_key``) when an id of the packet holds a secret.
    """
    keys = [*packet.sources, *(k for c in packet.candidates for k in _keys(c))]
    if keys and scan("\n".join(keys), allow=allow):
        raise PacketError("secret_in_key")
    done = [redact_candidate(c, allow) for c in packet.candidates]
    total = sum(n for _, n in done)
    if not total:
        return packet, 0
    return msgspec.structs.replace(packet, candidates=tuple(c for c, _ in done)), total
