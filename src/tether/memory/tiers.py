"""The tiering listing over a home and its store: what ``memory tiers`` prints and what the
tiering job reads. Counts come from the recalls log, so they survive a re-index."""

from __future__ import annotations

from pathlib import Path

from tether.core.context.tier_rules import Listing, TierItem, cap_notes, render_listing, tier_items
from tether.memory.identity import Identity
from tether.ports import TierStore


def tiers(home: Path, store: TierStore) -> list[TierItem]:
    return tier_items(Identity(home, store).entries(), store.notes(), store.recall_stats())


def listing(home: Path, store: TierStore, notes: int | None) -> Listing:
    """The listing with at most ``notes`` notes (``[memory] tiers_notes``; None: all)."""
    return cap_notes(tiers(home, store), notes)


def tiers_text(home: Path, store: TierStore, notes: int) -> str:
    """The tiering job's listing: untrusted notes listed and marked, their text withheld."""
    return render_listing(listing(home, store, notes), withhold_untrusted=True)
