"""Notes: agent- or owner-written facts worth finding later, trusted or not, journalled.

A note's text is ``Screened`` (``tether.scan.screen``): no secret is stored in clear."""

from __future__ import annotations

from datetime import datetime

from tether.errors import BadInputError
from tether.ports import NoteWriter
from tether.records import JournalEntry, Note
from tether.scan.screen import Screened

#: The longest note, in characters: a note is a fact worth finding later, not a document.
MAX_NOTE_CHARS = 20_000


def write_note(
    store: NoteWriter,
    screened: Screened,
    *,
    untrusted: bool,
    who: str,
    session: str | None,
    time: datetime,
) -> Note:
    """Store a note and journal the write (who, which session, the text)."""
    text = screened.text
    if not text.strip():
        raise BadInputError("a note needs some text")
    if len(text) > MAX_NOTE_CHARS:
        raise BadInputError(
            f"a note is at most {MAX_NOTE_CHARS} characters (this one has {len(text)}); "
            "keep longer text in a page"
        )
    note = store.add_note(text, untrusted=untrusted, session=session, time=time)
    store.journal_append(
        JournalEntry(
            time=time,
            who=who,
            session=session,
            action="note",
            target=f"note:{note.id}",
            before=None,
            after=text,
        )
    )
    return note
