"""Identity: ``memory/memory.md``, owner-editable, tool edits atomic and journalled.

The file is markdown; its list items are the entries. The owner may edit it by hand at
any time; tools read it fresh for every edit, under a lock, and write it back through a
temporary file and a rename, so a crash never leaves half a file. What an edit writes
is ``Screened`` (``tether.scan.screen``): no secret enters the file in clear.

The entries are also indexed for recall (kind ``identity``, ref ``identity:<entry id>``):
``sync`` compares the file's sha256 with the one stored with the index and re-indexes
when they differ. Recall runs it first, so a hand edit is found by the next recall; tool
edits run it too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tether.core.context.memory_block import Entry, entry_id, parse_entries
from tether.errors import BadInputError, TetherError
from tether.files import read_home_bytes, write_atomic
from tether.ports import IdentityStore
from tether.records import JournalEntry
from tether.scan.allow import home_allow
from tether.scan.screen import Screened, screen
from tether.scan.secrets import redact

MEMORY_FILE = "memory/memory.md"
STARTER = (
    "# Identity\n\n"
    "Who the owner is and how the agent should act. One entry per list item; edit freely.\n\n"
)


#: The longest identity entry, in characters. Every entry is in every session's baseline:
#: a longer text belongs in a note or a page, which recall finds when it is wanted.
MAX_ENTRY_CHARS = 1_000


def _within_limit(text: str) -> None:
    if len(text) > MAX_ENTRY_CHARS:
        raise IdentityError(
            f"an identity entry is at most {MAX_ENTRY_CHARS} characters (this one has "
            f"{len(text)}); keep longer text in a note or a page"
        )


def entry_lines(text: str) -> int:
    """The lines of ``text`` that hold something: an identity entry is one (a list item),
    and joining more would change the text, so an owner's edit of more is refused (each
    front end words the refusal for its own input)."""
    return sum(1 for line in text.splitlines() if line.strip())


class IdentityError(BadInputError):
    """An identity edit that cannot be applied (unknown entry id, empty text)."""


class Identity:
    """Read and edit memory.md; every edit is journalled in the store."""

    def __init__(self, home: Path, store: IdentityStore) -> None:
        self.home = home
        self.path = home / MEMORY_FILE
        self._lock_path = self.path.with_name(".memory.md.lock")
        self.store = store

    def text(self) -> str:
        try:
            # Never through a link: a memory.md linked to another file would make that
            # file the agent's identity.
            return read_home_bytes(self.path).decode("utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            raise TetherError(f"{self.path}: cannot read identity: {exc}") from None

    def entries(self) -> list[Entry]:
        return parse_entries(self.text())

    def sync(self) -> bool:
        """Re-index the entries if memory.md changed since they were indexed; True if so."""
        try:
            data = read_home_bytes(self.path)
            mtime = datetime.fromtimestamp(self.path.stat(follow_symlinks=False).st_mtime, UTC)
        except FileNotFoundError:
            data, mtime = b"", datetime.fromtimestamp(0, UTC)
        except OSError as exc:
            raise TetherError(f"{self.path}: cannot read identity: {exc}") from None
        stamp = hashlib.sha256(data).hexdigest()
        if stamp == self.store.identity_stamp():
            return False
        try:
            entries = parse_entries(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TetherError(f"{self.path}: cannot read identity: {exc}") from None
        # The owner may write anything in the file by hand; recall shows it redacted.
        allow = home_allow(self.home)
        shown = [Entry(e.id, redact(e.text, allow=allow).text) for e in entries]
        self.store.replace_identity(shown, stamp=stamp, time=mtime)
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An edit: memory.md, its index and its journal entries change together. The file
        as it was is kept as a hard link (no room needed) until the edit is done; when the
        index or the journal fails after the file was replaced (a full disk), it is put back
        with a rename: an edit is never left in the file without its journal entry."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            kept = self.path.with_name(".memory.md.before")
            kept.unlink(missing_ok=True)  # a killed edit's: the file is what it left
            had = self.path.exists()
            if had:
                os.link(self.path, kept)
            try:
                yield
            except BaseException:
                self._put_back(kept if had else None)
                raise
            kept.unlink(missing_ok=True)

    def _put_back(self, kept: Path | None) -> None:
        with contextlib.suppress(OSError, TetherError):
            if kept is None:
                self.path.unlink(missing_ok=True)
            elif os.path.samefile(kept, self.path):
                kept.unlink()  # the edit failed before the file was replaced
                return
            else:
                os.replace(kept, self.path)
            self.sync()  # may fail too: recall brings the index in step later

    def _write(self, text: str) -> None:
        write_atomic(self.path, text.encode("utf-8"))
        self.sync()

    def _journal(
        self,
        action: str,
        *,
        before: str | None,
        after: str | None,
        who: str,
        session: str | None,
        time: datetime,
    ) -> None:
        self.store.journal_append(
            JournalEntry(
                time=time,
                who=who,
                session=session,
                action=action,
                target="identity",
                before=before,
                after=after,
            )
        )

    def add(self, screened: Screened, *, who: str, session: str | None, time: datetime) -> Entry:
        text = " ".join(screened.text.split())
        if not text:
            raise IdentityError("an identity entry needs some text")
        _within_limit(text)
        with self._locked():
            current = self.text()
            eid = entry_id(text)
            if any(e.id == eid for e in parse_entries(current)):
                return Entry(eid, text)  # already there: adding twice is a no-op
            base = current if current else STARTER
            if not base.endswith("\n"):
                base += "\n"
            self._write(base + f"- {text}\n")
            self._journal("add", before=None, after=text, who=who, session=session, time=time)
        return Entry(eid, text)

    def remove(
        self, ids: Sequence[str], *, who: str, session: str | None, time: datetime
    ) -> list[Entry]:
        with self._locked():
            current = self.text()
            removed = _pick(current, ids)
            self._write(_without(current, {e.id for e in removed}))
            for e in removed:
                self._journal(
                    "remove", before=e.text, after=None, who=who, session=session, time=time
                )
        return removed

    def consolidate(
        self,
        ids: Sequence[str],
        screened: Screened,
        *,
        who: str,
        session: str | None,
        time: datetime,
    ) -> Entry:
        """Replace several entries with one, at the place of the first of them."""
        text = " ".join(screened.text.split())
        if not text:
            raise IdentityError("a consolidated entry needs some text")
        _within_limit(text)
        if not ids:
            raise IdentityError("consolidate needs the ids of the entries it replaces")
        with self._locked():
            current = self.text()
            before = "\n".join(e.text for e in _pick(current, ids))
            self._write(_without(current, set(ids), replace_first_with=f"- {text}"))
            self._journal(
                "consolidate", before=before, after=text, who=who, session=session, time=time
            )
        return Entry(entry_id(text), text)

    def redact(self, allow: frozenset[str], *, who: str, time: datetime, expect: str) -> int:
        """Rewrite memory.md with every secret redacted, if it still reads ``expect``
        (the text the caller scanned; an edit meanwhile leaves it alone: 0). The journal
        says how many were replaced, never what they were."""
        with self._locked():
            current = self.text()
            if current != expect:
                return 0
            done = screen(current, what="memory.md", allow=allow, on_secret="redact")
            if not done.redacted:
                return 0
            self._write(done.text)
            self._journal(
                "redact", before=None, after=done.note(), who=who, session=None, time=time
            )
            return done.total


def _pick(markdown: str, ids: Sequence[str]) -> list[Entry]:
    """The entries named by ``ids``, in that order; any unknown id refuses the edit."""
    entries = {e.id: e for e in parse_entries(markdown)}
    missing = [i for i in ids if i not in entries]
    if missing:
        raise IdentityError(f"no identity entry with id {', '.join(missing)}")
    return [entries[i] for i in ids]


def _without(markdown: str, ids: set[str], replace_first_with: str | None = None) -> str:
    out: list[str] = []
    replaced = False
    for line in markdown.splitlines():
        entries = parse_entries(line)
        if entries and entries[0].id in ids:
            if replace_first_with is not None and not replaced:
                out.append(replace_first_with)
                replaced = True
            continue
        out.append(line)
    return "\n".join(out) + "\n"
