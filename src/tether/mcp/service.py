"""The memory as ``tether mcp`` serves it, behind the lanes' fences.

Four operations, each for one ``Caller`` (its lane, its token id, whether what it writes
is trusted): ``recall`` (compact hits within ``[mcp] result_tokens``; with vectors on,
rows still without a vector embedded first when few, else a ``notice`` in the result
that the search was lexical: ``memory.readiness``), ``read`` (the full
item a ``tether://`` link names), ``remember`` (a note) and ``pages`` (slugs under a
prefix). A ``local`` caller (stdio) sees everything the owner's own CLI does. A
``remote`` caller (HTTP) sees world-visibility pages and facts only: its recall searches
just their index rows (``Store.search_terms(only=...)``), and ``read`` refuses any other
link before reading it (``core.mcp.fence``); a private page or fact reads as absent, with
the same words as one that does not exist, so a remote client cannot even learn it is
there. Every write is journalled with the caller's lane and token id in ``who``
(``mcp:local``, ``mcp:remote:t-1a2b3c4d``).

Errors are ``TetherError``s with a message for the client; the server turns them into
tool errors, never a crash. ``recall`` runs in a worker thread (``mcp.server``), so two
may run at once: the index pass before a search is taken by one at a time (two passes
over the same new lines would index them twice); the stores and the vectors lock their
own state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import msgspec

from tether.checkpoint.bank import parse_segment_link, read_segment, sessions_banked
from tether.checkpoint.recallable import Links, catch_up
from tether.core import mcp
from tether.core.checkpoints.window import strip_private
from tether.core.context import tokens
from tether.core.sweep.state import NO_SWEEP, Fact
from tether.errors import BadInputError, NotFoundError, TetherError
from tether.memory.identity import Identity
from tether.memory.indexer import index_home, turn_rows
from tether.memory.notes import write_note
from tether.memory.pages import render
from tether.memory.readiness import VAGUE, ready_for_recall
from tether.memory.recall import recall, recall_sessions
from tether.memory.vectors import Vectors
from tether.ports import MemoryStore, SweepStore
from tether.records import Hit, Page
from tether.scan.allow import home_allow
from tether.scan.screen import screen
from tether.scan.secrets import redact
from tether.sessions import Session

Level = Literal["sessions", "turns"]
#: The longest question, in characters (a question, not a document).
MAX_QUERY_CHARS = 2000
#: The most hits one recall returns.
MAX_K = 50
#: The longest ``pages`` prefix.
MAX_PREFIX_CHARS = 128


@dataclass(frozen=True)
class Caller:
    """Who is asking: the lane, the bearer token's id (HTTP), and whether a note it
    writes is trusted (stdio unless ``--untrusted``; HTTP never)."""

    lane: mcp.Lane
    token: str | None = None
    trusted: bool = False

    @property
    def who(self) -> str:
        return f"mcp:{self.lane}" + (f":{self.token}" if self.token else "")


def _stamp(time: datetime | None) -> str | None:
    return None if time is None else time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _absent(link: str) -> NotFoundError:
    return NotFoundError(f"nothing at {link} that this client may read")


class Memory:
    """The operations over one home, its store and (when the sweep ran there) its sweep
    store. ``now`` is the clock (tests pass their own)."""

    def __init__(
        self,
        home: Path,
        store: MemoryStore,
        sweep: SweepStore | None,
        *,
        result_tokens: int,
        now: Callable[[], datetime],
        vectors: Vectors | None = None,
        slot: int = 0,
    ) -> None:
        self.home = home
        self.slot = slot  # ``[slots] main``: the slot of a session the catch-up creates
        self.vectors = vectors  # ``[recall] vectors``; None: lexical recall
        self.store = store
        self.sweep = sweep
        self.result_tokens = result_tokens
        self.now = now
        self._indexing = threading.Lock()  # one index pass at a time (the module's doc)

    # -- what a remote caller may see ----------------------------------------------------

    def _facts(self) -> list[Fact]:
        if self.sweep is None:
            return []
        with self.sweep.transaction(write=False) as tx:
            return tx.active_facts() if tx.facts_stamp() != NO_SWEEP else []

    def world_refs(self) -> list[str]:
        """The index refs of every world-visibility page and active fact."""
        refs = [f"page:{p.slug}" for p in self.store.pages() if p.visibility == "world"]
        refs += [f"fact:{f.id}" for f in self._facts() if f.visibility == "world"]
        return refs

    # -- recall ------------------------------------------------------------------------

    def _up_to_date(self) -> None:
        """What the hooks banked in the index before a search (a window they had no time
        to index, or never appended): the server runs for a whole harness session. Only
        the harness sessions are passed over (tether's own index themselves as they
        write), so a search stays cheap however many sessions the home holds."""
        with self._indexing:
            catch_up(self.home, allow=home_allow(self.home), slot=self.slot)
            harness = [s for s in sessions_banked(self.home) if Session.exists(self.home, s)]
            if harness:
                index_home(self.home, self.store, only=harness)

    def recall(
        self, caller: Caller, query: str, limit: int, level: Level, *, order: str = "rank"
    ) -> str:
        if len(query) > MAX_QUERY_CHARS:
            raise BadInputError(f"query is at most {MAX_QUERY_CHARS} characters (got {len(query)})")
        if not 1 <= limit <= MAX_K:
            raise BadInputError(f"k is 1 to {MAX_K} (got {limit})")
        if order not in ("rank", "time"):
            raise BadInputError(f"order is rank or time (got {order!r})")
        if caller.lane == "local":  # a remote caller searches world pages and facts only
            self._up_to_date()
        notice = self._ready(caller)
        time = self.now()
        links = Links(self.home)
        if level == "sessions":
            if order == "time":
                raise BadInputError("order time lists turns: use it with level turns")
            if caller.lane == "remote":
                raise mcp.FenceError(caller.lane, "level sessions", "a search of transcripts")
            found = recall_sessions(self.store, query, limit, time=time, vectors=self.vectors)
            compact = [self._session_hit(s.session, s.turns[0], links) for s in found]
        else:
            only = self.world_refs if caller.lane == "remote" else None
            hits = recall(
                self.store,
                query,
                limit,
                time=time,
                home=self.home,
                sweep=self.sweep,
                only=only,
                vectors=self.vectors,
                in_time_order=order == "time",
            )
            compact = [self._compact(h, links) for h in hits]
        kept, left_out = mcp.pack(compact, self.result_tokens, notice)
        return mcp.render(kept, left_out, notice)

    def _ready(self, caller: Caller) -> str | None:
        """Rows still without a vector embedded first when few (``memory.readiness``),
        else the result's ``notice`` that the search is lexical. A remote caller is told
        no counts: how much private memory the home holds is not its business."""
        notice = ready_for_recall(self.vectors).notice
        if notice is None or caller.lane == "local":
            return notice
        return VAGUE

    @staticmethod
    def _compact(hit: Hit, links: Links) -> mcp.CompactHit:
        return mcp.CompactHit(
            id=hit.ref,
            kind=hit.kind,
            time=_stamp(hit.time),
            link=mcp.link_of(hit.ref),
            trust="untrusted" if hit.tag == "memory-tainted" else "trusted",
            text=mcp.first_line(strip_private(hit.text)),
            session=hit.session,
            segment=links.of(hit.session, hit.time),
            turns=None if hit.first_turn is None else f"{hit.first_turn}-{hit.last_turn}",
            since=None if hit.first_turn is None else _stamp(hit.first_time),
        )

    def _session_hit(self, session: str, best: Hit, links: Links) -> mcp.CompactHit:
        return mcp.CompactHit(
            id=f"session:{session}",
            kind="session",
            time=_stamp(best.time),
            link=mcp.link_of(best.ref),
            trust="untrusted" if best.tag == "memory-tainted" else "trusted",
            text=mcp.first_line(strip_private(best.text)),
            session=session,
            segment=links.of(session, best.time),
        )

    # -- read --------------------------------------------------------------------------

    def read(self, caller: Caller, text: str) -> str:
        """The item ``text`` links to, ``<private>`` spans shown as ``[private]``."""
        return strip_private(self._read(caller, text))

    def _read(self, caller: Caller, text: str) -> str:
        link = mcp.parse_link(text)
        mcp.fence(link, caller.lane)
        if link.kind == "page":
            return self._page_text(caller, link.key, link.text)
        if link.kind == "fact":
            return self._fact(caller, int(link.key), link.text)
        if link.kind == "note":
            note = next((n for n in self.store.notes() if n.id == int(link.key)), None)
            if note is None:
                raise _absent(link.text)
            trust = "untrusted" if note.untrusted else "trusted"
            return f"[note {note.id}; {trust}; {_stamp(note.time)}]\n\n{note.text}"
        if link.kind == "identity":
            entry = next(
                (e for e in Identity(self.home, self.store).entries() if e.id == link.key), None
            )
            if entry is None:
                raise _absent(link.text)
            return f"[identity {entry.id}; trusted]\n\n{entry.text}"
        if link.kind == "turns":
            return self._turns(link)
        return self._segment(link.text)

    def _visible_page(self, caller: Caller, slug: str, link: str) -> Page:
        page = self.store.get_page(slug)
        if page is None or (caller.lane == "remote" and page.visibility != "world"):
            raise _absent(link)
        return page

    def _page_text(self, caller: Caller, slug: str, link: str) -> str:
        page = self._visible_page(caller, slug, link)
        trust = "untrusted" if page.untrusted else "trusted"
        head = f"[page {page.slug}; {page.visibility}; {trust}; {_stamp(page.updated_at)}]"
        return f"{head}\n\n{render(page)}"

    def page_resource(self, caller: Caller, slug: str) -> str:
        """A page as the resource ``tether://<slug>`` (its text, no header)."""
        link = mcp.PREFIX + slug
        page = self._visible_page(caller, mcp.parse_link(link).key, link)
        return strip_private(render(page))

    def visible_pages(self, caller: Caller, prefix: str = "") -> list[Page]:
        return [
            p
            for p in sorted(self.store.pages(), key=lambda page: page.slug)
            if p.slug.startswith(prefix) and (caller.lane == "local" or p.visibility == "world")
        ]

    def _fact(self, caller: Caller, fact_id: int, link: str) -> str:
        f = next((f for f in self._facts() if f.id == fact_id), None)
        if f is None or (caller.lane == "remote" and f.visibility != "world"):
            raise _absent(link)
        text = redact(f.text, allow=home_allow(self.home)).text
        head = (
            f"[fact {fact_id} {f.subject}/{f.entity}; {f.visibility}; trusted; "
            f"{f.authority}; {_stamp(f.updated_at)}]"
        )
        return f"{head}\n\n{text}"

    def _turns(self, link: mcp.Link) -> str:
        rows = turn_rows(self.home, link.key, link.first, link.last)
        if not rows:
            raise _absent(link.text)
        trust = "untrusted" if any(r.tainted for r in rows) else "trusted"
        span = f"{link.first}" if link.first == link.last else f"{link.first}-{link.last}"
        lines = [f"[session {link.key} turns {span}; {trust}]", ""]
        lines += [f"turn {r.turn} {r.field} ({_stamp(r.time)}): {r.text}" for r in rows]
        return "\n".join(lines)

    def _segment(self, text: str) -> str:
        session, _ = parse_segment_link(text)
        body = read_segment(self.home, text)
        try:
            tainted = Session.open(self.home, session).untrusted()
        except TetherError:
            tainted = True  # cannot tell: fail closed
        return f"[segment; {'untrusted' if tainted else 'trusted'}]\n\n{body}"

    # -- writes ------------------------------------------------------------------------

    def remember(self, caller: Caller, text: str) -> str:
        screened = screen(text, what="note", allow=home_allow(self.home), on_secret="redact")
        note = write_note(
            self.store,
            screened,
            untrusted=not caller.trusted,
            who=caller.who,
            session=None,
            time=self.now(),
        )
        told = f"; {screened.note()}" if screened.redacted else ""
        trust = "trusted" if not note.untrusted else "untrusted"
        return f"remembered {trust} note {note.id} (tether://note:{note.id}){told}"

    # -- pages -------------------------------------------------------------------------

    def pages(self, caller: Caller, prefix: str) -> str:
        if len(prefix) > MAX_PREFIX_CHARS or any(
            not (ch.isascii() and (ch.isalnum() or ch in "-/")) or ch.isupper() for ch in prefix
        ):
            raise BadInputError(
                f"prefix: up to {MAX_PREFIX_CHARS} characters of a-z, 0-9, '-' and '/' "
                "(the start of a page slug)"
            )
        shown: list[dict[str, str | None]] = []
        left_out = 0
        for p in self.visible_pages(caller, prefix):
            item = {
                "slug": p.slug,
                "title": mcp.first_line(p.title),
                "visibility": p.visibility,
                "updated": _stamp(p.updated_at),
                "link": mcp.PREFIX + p.slug,
            }
            out = {"pages": [*shown, item], "left_out": 0}
            if left_out or tokens.count(msgspec.json.encode(out).decode()) > self.result_tokens:
                left_out += 1
                continue
            shown.append(item)
        return msgspec.json.encode({"pages": shown, "left_out": left_out}).decode()
