"""The daily sweep's active facts, mirrored into the main store's index at recall time.

Two ports meet here and nowhere else: the ``SweepStore`` gives its fact change stamp and
the active facts (one read transaction, so they agree), the ``Store`` keeps the stamp it
indexed last and replaces its fact rows. A cheap stamp compare when nothing changed; when
it did, the facts are redacted (recall never hands back a key a fact quotes) and handed
over with the stamp the store is expected to still hold, so two recalls syncing at once
never put an older snapshot over a newer one (the loser reads again). No sweep store, or
one without tables yet, is the stamp ``NO_SWEEP`` with no facts.
"""

from __future__ import annotations

import msgspec

from tether.core.context.memory_block import BlockFact
from tether.core.sweep.state import NO_SWEEP, Fact
from tether.ports import FactIndex, SweepStore
from tether.scan.secrets import redact

#: Reads of the sweep one sync makes at most when other syncs keep winning the race.
ATTEMPTS = 3


def _read(sweep: SweepStore | None) -> tuple[str, list[Fact]]:
    if sweep is None:
        return NO_SWEEP, []
    with sweep.transaction(write=False) as tx:
        stamp = tx.facts_stamp()
        return stamp, [] if stamp == NO_SWEEP else tx.active_facts()


def block_facts(
    sweep: SweepStore | None, owner: str, *, allow: frozenset[str] = frozenset()
) -> list[BlockFact]:
    """``owner``'s active facts for the memory block, redacted, newest first (the block
    puts the highest authority first). None when the sweep has no tables yet."""
    if sweep is None:
        return []
    with sweep.transaction(write=False) as tx:
        if tx.facts_stamp() == NO_SWEEP:
            return []
        facts = [f for f in tx.facts(owner) if f.active]
    facts.sort(key=lambda fact: (fact.updated_at, fact.id), reverse=True)
    return [BlockFact(redact(f.text, allow=allow).text, f.authority) for f in facts]


def _stamp(sweep: SweepStore | None) -> str:
    if sweep is None:
        return NO_SWEEP
    with sweep.transaction(write=False) as tx:
        return tx.facts_stamp()


def sync_facts(
    store: FactIndex, sweep: SweepStore | None, *, allow: frozenset[str] = frozenset()
) -> bool:
    """Re-index the sweep's active facts if they changed since last time, each
    secret-redacted but for the ``allow`` fingerprints; True when it did."""
    for _ in range(ATTEMPTS):
        indexed = store.facts_stamp()
        if _stamp(sweep) == indexed:
            return False
        stamp, facts = _read(sweep)
        shown = [msgspec.structs.replace(f, text=redact(f.text, allow=allow).text) for f in facts]
        if store.replace_facts(shown, stamp=stamp, expect=indexed):
            return True
    return False
