"""The tiering listing, pure: every identity entry and the most recalled notes (at most
``[memory] tiers_notes``, with a line saying how many more there are), with how often
recall found each and when last, untrusted notes marked.

It is the user text of the tiering job (after the time line and the prompt) and what
``tether memory tiers`` prints. Note text goes to a model, so it is flattened to one line
and tag-neutralised; an untrusted note is marked so the prompt can forbid promoting it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tether.core.context.compaction_rules import cap, neutralise
from tether.core.context.memory_block import Entry
from tether.records import Note, RecallStat

#: Characters of one item's text in the text listing (JSON keeps the whole text).
ITEM_CHARS = 1000
HEADING = (
    "Memory listing: every identity entry and the notes (the most recalled, when there are "
    "many), with how many times recall found each and when it was last found."
)
UNTRUSTED_MARK = "UNTRUSTED, never promote"
WITHHELD = "(text withheld: untrusted; the owner can read it with `tether memory tiers`)"


@dataclass(frozen=True)
class TierItem:
    kind: Literal["identity", "note"]
    #: The recalls log's key: ``identity:<entry id>`` or ``note:<id>``.
    ref: str
    id: str
    text: str
    untrusted: bool
    session: str | None
    written: datetime | None
    recalls: int
    last_found: datetime | None


def tier_items(
    entries: Sequence[Entry], notes: Sequence[Note], stats: Mapping[str, RecallStat]
) -> list[TierItem]:
    """Identity entries in file order, then notes oldest first."""
    items: list[TierItem] = []
    for e in entries:
        ref = f"identity:{e.id}"
        stat = stats.get(ref)
        items.append(
            TierItem(
                kind="identity",
                ref=ref,
                id=e.id,
                text=e.text,
                untrusted=False,
                session=None,
                written=None,
                recalls=stat.count if stat else 0,
                last_found=stat.last if stat else None,
            )
        )
    for n in sorted(notes, key=lambda note: note.id):
        ref = f"note:{n.id}"
        stat = stats.get(ref)
        items.append(
            TierItem(
                kind="note",
                ref=ref,
                id=str(n.id),
                text=n.text,
                untrusted=n.untrusted,
                session=n.session,
                written=n.time,
                recalls=stat.count if stat else 0,
                last_found=stat.last if stat else None,
            )
        )
    return items


@dataclass(frozen=True)
class Listing:
    """What a listing shows: every identity entry and the kept notes, in ``tier_items``
    order, and how many notes were left out."""

    items: tuple[TierItem, ...]
    more_notes: int = 0


def _rank(item: TierItem) -> tuple[int, datetime, int]:
    return (item.recalls, item.last_found or _NEVER, int(item.id))


_NEVER = datetime.min.replace(tzinfo=UTC)


def cap_notes(items: Sequence[TierItem], notes: int | None) -> Listing:
    """At most ``notes`` notes (None: all): the most recalled, ties to the most recently
    found and then the newest, so what the tiering job would promote or keep is listed
    first; identity entries are always all there (the memory block bounds them)."""
    every = [i for i in items if i.kind == "note"]
    if notes is None or len(every) <= notes:
        return Listing(tuple(items))
    kept = {i.id for i in sorted(every, key=_rank, reverse=True)[:notes]}
    shown = tuple(i for i in items if i.kind == "identity" or i.id in kept)
    return Listing(shown, more_notes=len(every) - notes)


def _when(time: datetime | None) -> str:
    return "never" if time is None else f"{time.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _found(item: TierItem) -> str:
    times = "1 time" if item.recalls == 1 else f"{item.recalls} times"
    last = f", last {_when(item.last_found)}" if item.recalls else ""
    return f"recalled {times}{last}"


def _text(text: str) -> str:
    return cap(neutralise(" ".join(text.split())), ITEM_CHARS)


def render_listing(listing: Listing, *, withhold_untrusted: bool = False) -> str:
    """The listing as text. ``withhold_untrusted`` (the tiering job's listing, read by a
    model in a session that may edit identity) leaves out the text of untrusted notes:
    they are listed and marked, but their words, which may carry an injected instruction,
    never reach a session whose taint would not say so."""
    identity = [i for i in listing.items if i.kind == "identity"]
    notes = [i for i in listing.items if i.kind == "note"]
    more = listing.more_notes
    lines = [HEADING, "", f"Identity entries ({len(identity)}):"]
    lines += [f"- [{i.id}] {_text(i.text)} ({_found(i)})" for i in identity] or ["(none)"]
    count = f"{len(notes)} of {len(notes) + more}, the most recalled" if more else len(notes)
    lines += ["", f"Notes ({count}):"]
    for n in notes:
        trust = UNTRUSTED_MARK if n.untrusted else "trusted"
        origin = f", from session {n.session}" if n.session else ""
        written = f", written {n.written.astimezone(UTC):%Y-%m-%d}" if n.written else ""
        text = WITHHELD if n.untrusted and withhold_untrusted else _text(n.text)
        lines.append(f"- note {n.id} ({trust}{origin}{written}; {_found(n)}): {text}")
    if not notes:
        lines.append("(none)")
    if more:
        lines.append(f"({more_line(more)})")
    return "\n".join(lines)


def more_line(more: int) -> str:
    """What a capped listing says of the notes it left out."""
    noun = "note" if more == 1 else "notes"
    return (
        f"{more} more {noun} not listed, each recalled no more often than those above;"
        " `tether memory tiers --all` lists every note"
    )


def _iso(time: datetime | None) -> str | None:
    return None if time is None else time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def listing_json(listing: Listing) -> dict[str, Any]:
    """The public shape of ``memory tiers --json`` (add keys, never rename)."""
    items = listing.items
    return {
        "identity": [
            {"id": i.id, "text": i.text, "recalls": i.recalls, "last_found": _iso(i.last_found)}
            for i in items
            if i.kind == "identity"
        ],
        "notes": [
            {
                "id": int(i.id),
                "text": i.text,
                "untrusted": i.untrusted,
                "session": i.session,
                "written": _iso(i.written),
                "recalls": i.recalls,
                "last_found": _iso(i.last_found),
            }
            for i in items
            if i.kind == "note"
        ],
        "more_notes": listing.more_notes,
    }
