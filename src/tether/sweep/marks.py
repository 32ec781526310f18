"""What the owner marks on a session for the sweep, as ``session discard`` and ``session
folder`` (and the memory browser page) set it: discarded (its days are swept without it;
the log and its recall stay), and the folder it is filed under (an owner-set folder always
wins: the sweep never refiles it).

The marks live in the store (``Store.session_meta``), where the sweep reads them; a session
the store does not know yet belongs to the home's owner, is not discarded and has no
folder. The session is opened first, so an unknown or malformed id is refused (exit 2)
before the store is opened.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import msgspec

from tether.core.learning.extraction import folder_name
from tether.errors import BadInputError
from tether.ports import SessionMetas, StoreOpener
from tether.records import SessionMeta
from tether.sessions import Session


def _meta(store: SessionMetas, sid: str) -> SessionMeta:
    return store.session_meta(sid) or SessionMeta(session=sid)


def discard(
    home: Path, opener: StoreOpener, sid: str, *, undo: bool, time: datetime
) -> SessionMeta:
    """Discard session ``sid`` from the sweep as of ``time`` (a session already discarded
    keeps its first time), or, with ``undo``, take the discard back; the marks written."""
    Session.open(home, sid)  # an unknown or malformed id exits 2
    with opener() as store:
        meta = _meta(store, sid)
        when = None if undo else (meta.discarded_at or time)
        done = msgspec.structs.replace(meta, discarded_at=when)
        store.put_session_meta(done)
    return done


def file_under(home: Path, opener: StoreOpener, sid: str, name: str) -> SessionMeta:
    """File session ``sid`` under folder ``name`` (1 to 64 printable characters, single
    spaces, no '/'), set by the owner; the marks written."""
    folder = folder_name(name)
    if folder is None or folder != name.strip():
        raise BadInputError(
            f"folder {name!r}: expected 1 to 64 printable characters, single spaces, no '/'"
        )
    Session.open(home, sid)
    with opener() as store:
        done = msgspec.structs.replace(_meta(store, sid), folder=folder, folder_by="owner")
        store.put_session_meta(done)
    return done
