"""The SQLite schema as numbered migrations, tracked in ``PRAGMA user_version``; and
``migrate``, the one runner both schemas in the file use (this one and the sweep's,
``sqlite.sweep_schema``, which keeps its own version).

``MIGRATIONS[n]`` takes a database from version n to n + 1 in one transaction. Append a
new script for every change; never edit one that has shipped: databases in the field
have run it already. A database at a version beyond this list is refused, unchanged.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from tether.core.recall import cjk, symbols
from tether.errors import StoreVersionError

#: The symbol tokens' migration: a script with no SQL (see ``_resegment``).
_SYMBOLS = "-- symbols: see _resegment\n"

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE index_cursor (
        path TEXT PRIMARY KEY,
        offset INTEGER NOT NULL,
        lines INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        tainted INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE doc (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('turn', 'summary', 'page', 'fact', 'note')),
        session TEXT,
        epoch INTEGER,
        turn INTEGER,
        field TEXT,
        tainted INTEGER NOT NULL,
        ref TEXT,              -- note:<id>, page:<slug>, NULL for log rows
        time INTEGER NOT NULL, -- unix microseconds, UTC
        text TEXT NOT NULL
    );
    CREATE INDEX doc_ref ON doc (ref) WHERE ref IS NOT NULL;

    -- Counters kept in the same transactions as what they count ('doc_rows': rows of
    -- doc, which recall needs for term weights and count(*) would scan for).
    CREATE TABLE stat (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO stat (name, value) VALUES ('doc_rows', 0);

    CREATE VIRTUAL TABLE doc_fts USING fts5 (
        text,
        content = 'doc',
        content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );

    CREATE TABLE note (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        text TEXT NOT NULL,
        untrusted INTEGER NOT NULL,
        session TEXT,
        time TEXT NOT NULL
    );

    CREATE TABLE page (
        slug TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        tags TEXT NOT NULL, -- JSON list
        visibility TEXT NOT NULL CHECK (visibility IN ('private', 'world')),
        untrusted INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );

    CREATE TABLE journal (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time TEXT NOT NULL,
        who TEXT NOT NULL,
        session TEXT,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        before TEXT,
        after TEXT
    );

    CREATE TABLE recall_log (
        id INTEGER PRIMARY KEY,
        ref TEXT NOT NULL,
        time TEXT NOT NULL
    );
    CREATE INDEX recall_log_ref ON recall_log (ref, time);
    """,
    # 2: the index gets two columns, so recall can weigh the owner's words (user text,
    # notes, pages: ``body``) above the rest of a log (replies, tool calls, summaries:
    # ``aside``). Both are computed from ``doc.text``, which stays the one copy; the
    # index is rebuilt from it, once (17 s for 2M rows here).
    """
    ALTER TABLE doc ADD COLUMN body TEXT GENERATED ALWAYS AS
        (CASE WHEN field IN ('assistant', 'tool_call', 'summary') THEN '' ELSE text END)
        VIRTUAL;
    ALTER TABLE doc ADD COLUMN aside TEXT GENERATED ALWAYS AS
        (CASE WHEN field IN ('assistant', 'tool_call', 'summary') THEN text ELSE '' END)
        VIRTUAL;
    DROP TABLE doc_fts;
    CREATE VIRTUAL TABLE doc_fts USING fts5 (
        body,
        aside,
        content = 'doc',
        content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO doc_fts (doc_fts) VALUES ('rebuild');
    """,
    # 3: identity entries (memory.md) and the sweep's active facts are indexed too, as
    # kinds ``identity`` (ref ``identity:<entry id>``) and ``fact`` (``fact:<id>``).
    # ``doc`` is copied to widen its kind CHECK; row ids are kept, so the FTS index (by
    # rowid over the same text) stays valid without a rebuild. ``mirror`` holds what each
    # mirrored source looked like when last indexed ('identity': memory.md's sha256,
    # 'facts': the sweep's fact change counter), so recall re-syncs only on a change.
    """
    CREATE TABLE doc_new (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL
            CHECK (kind IN ('turn', 'summary', 'page', 'fact', 'note', 'identity')),
        session TEXT,
        epoch INTEGER,
        turn INTEGER,
        field TEXT,
        tainted INTEGER NOT NULL,
        ref TEXT,              -- note:<id>, page:<slug>, identity:<id>, fact:<id>; NULL for logs
        time INTEGER NOT NULL, -- unix microseconds, UTC
        text TEXT NOT NULL,
        body TEXT GENERATED ALWAYS AS
            (CASE WHEN field IN ('assistant', 'tool_call', 'summary') THEN '' ELSE text END)
            VIRTUAL,
        aside TEXT GENERATED ALWAYS AS
            (CASE WHEN field IN ('assistant', 'tool_call', 'summary') THEN text ELSE '' END)
            VIRTUAL
    );
    INSERT INTO doc_new (id, kind, session, epoch, turn, field, tainted, ref, time, text)
        SELECT id, kind, session, epoch, turn, field, tainted, ref, time, text FROM doc;
    DROP TABLE doc;
    ALTER TABLE doc_new RENAME TO doc;
    CREATE INDEX doc_ref ON doc (ref) WHERE ref IS NOT NULL;
    CREATE TABLE mirror (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    """,
    # 4: Chinese, Japanese and Korean runs are indexed a second time as bigrams
    # (``core.recall.cjk``), so a search finds words inside them. ``seg`` holds them (NULL for
    # text without CJK) and both indexed columns append it to the text. Existing rows
    # with CJK get theirs from ``AFTER[4]`` (the index is updated for them only).
    """
    ALTER TABLE doc ADD COLUMN seg TEXT;
    ALTER TABLE doc DROP COLUMN body;
    ALTER TABLE doc DROP COLUMN aside;
    ALTER TABLE doc ADD COLUMN body TEXT GENERATED ALWAYS AS
        (CASE WHEN field IN ('assistant', 'tool_call', 'summary') THEN ''
         ELSE text || coalesce(' ' || seg, '') END)
        VIRTUAL;
    ALTER TABLE doc ADD COLUMN aside TEXT GENERATED ALWAYS AS
        (CASE WHEN field IN ('assistant', 'tool_call', 'summary')
         THEN text || coalesce(' ' || seg, '') ELSE '' END)
        VIRTUAL;
    """,
    # 5: the budget gate's spend ledger (``budget``): one row per gated model call,
    # and per local day and kind the running total the gate checks, so a check reads a
    # handful of rows however many calls the day has had.
    """
    CREATE TABLE budget_spend (
        id INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        day TEXT NOT NULL,
        kind TEXT NOT NULL,
        session TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('reserved', 'settled', 'refused')),
        reason TEXT,
        bound_tokens INTEGER NOT NULL,
        bound_usd REAL NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        usd REAL NOT NULL DEFAULT 0,
        cache_n INTEGER NOT NULL DEFAULT 0,
        prompt_n INTEGER NOT NULL DEFAULT 0,
        predicted_n INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX budget_spend_day ON budget_spend (day);
    CREATE TABLE budget_total (
        day TEXT NOT NULL,
        kind TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        usd REAL NOT NULL,
        PRIMARY KEY (day, kind)
    ) WITHOUT ROWID;
    """,
    # 6: what the sweep's producer reads of a day (``days``): log rows by time and
    # by session and turn, each session's owner, discard, folder, onboarding mark and
    # open turn, the epoch summaries compactions wrote, and the session-day digests.
    """
    CREATE INDEX doc_log_time ON doc (time) WHERE kind = 'turn';
    CREATE INDEX doc_log_turn ON doc (session, turn, time) WHERE kind = 'turn';
    CREATE TABLE session_meta (
        session TEXT PRIMARY KEY,
        owner TEXT,
        discarded_at TEXT,
        folder TEXT,
        folder_by TEXT CHECK (folder_by IN ('owner', 'sweep')),
        onboarding INTEGER NOT NULL DEFAULT 0,
        open_since TEXT,
        first_seen TEXT,
        imported INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX session_meta_owner ON session_meta (owner) WHERE owner IS NOT NULL;
    CREATE TABLE epoch_summary (
        session TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        time INTEGER NOT NULL, -- unix microseconds, UTC
        text TEXT NOT NULL,
        PRIMARY KEY (session, epoch)
    ) WITHOUT ROWID;
    CREATE INDEX epoch_summary_time ON epoch_summary (time);
    CREATE TABLE session_digest (
        session TEXT NOT NULL,
        window_id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        text TEXT NOT NULL,
        time TEXT NOT NULL,
        PRIMARY KEY (session, window_id, content_hash)
    ) WITHOUT ROWID;
    """,
    # Emoji and other symbols get index tokens in ``seg`` beside the CJK pieces
    # (``core.recall.symbols``): no SQL, only ``AFTER[SYMBOLS_VERSION]``, which gives every row
    # whose ``seg`` changes its new one. Its place in this tuple is its number.
    _SYMBOLS,
    # 8: sentence vectors of indexed rows (``sqlite.vectors``, the extra tether[vectors]).
    # One vector per part of a ``doc`` row (a long text is embedded in parts), made by
    # the model named in ``vec_model``: a model change leaves the old vectors unread
    # until re-embedded. A row deleted from ``doc``, or whose text is rewritten (a
    # redaction), loses its vectors in the same statement, and ``stat.vec_gone`` counts
    # it, so a reader holding vectors in memory knows to reload.
    """
    CREATE TABLE vec_model (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        dim INTEGER NOT NULL
    );
    CREATE TABLE doc_vec (
        id INTEGER PRIMARY KEY,
        doc INTEGER NOT NULL,
        part INTEGER NOT NULL,
        model INTEGER NOT NULL REFERENCES vec_model (id),
        dtype TEXT NOT NULL CHECK (dtype IN ('float32', 'int8')),
        scale REAL NOT NULL,   -- int8: value = byte x scale; float32: 1
        vec BLOB NOT NULL,
        UNIQUE (doc, part)
    );
    CREATE INDEX doc_vec_model ON doc_vec (model, doc);
    INSERT INTO stat (name, value) VALUES ('vec_gone', 0);
    CREATE TRIGGER doc_vec_deleted AFTER DELETE ON doc
    WHEN EXISTS (SELECT 1 FROM doc_vec WHERE doc = old.id)
    BEGIN
        DELETE FROM doc_vec WHERE doc = old.id;
        UPDATE stat SET value = value + 1 WHERE name = 'vec_gone';
    END;
    CREATE TRIGGER doc_vec_rewritten AFTER UPDATE OF text ON doc
    WHEN EXISTS (SELECT 1 FROM doc_vec WHERE doc = old.id)
    BEGIN
        DELETE FROM doc_vec WHERE doc = old.id;
        UPDATE stat SET value = value + 1 WHERE name = 'vec_gone';
    END;
    """,
    # 9: each log's state when it was indexed, so a pass with nothing new only stats.
    """
    ALTER TABLE index_cursor ADD COLUMN size INTEGER;
    ALTER TABLE index_cursor ADD COLUMN mtime_ns INTEGER;
    ALTER TABLE index_cursor ADD COLUMN ino INTEGER;
    ALTER TABLE index_cursor ADD COLUMN tail INTEGER;
    """,
)


def _set_segs(conn: sqlite3.Connection, segs: Sequence[tuple[int, str | None]]) -> None:
    """Each row's new ``seg``, its text index entry taken out under the old one and put
    back under the new (an FTS5 external-content index must be told what it held)."""
    for doc_id, seg in segs:
        body, aside = conn.execute("SELECT body, aside FROM doc WHERE id = ?", (doc_id,)).fetchone()
        conn.execute(
            "INSERT INTO doc_fts (doc_fts, rowid, body, aside) VALUES ('delete', ?, ?, ?)",
            (doc_id, body, aside),
        )
        conn.execute("UPDATE doc SET seg = ? WHERE id = ?", (seg, doc_id))
        conn.execute(
            "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id = ?",
            (doc_id,),
        )


def _segment_existing(conn: sqlite3.Connection) -> None:
    """Give every row with CJK text its ``seg``, and re-index those rows."""
    found = [
        (doc_id, seg)
        for doc_id, text in conn.execute("SELECT id, text FROM doc")
        if (seg := cjk.segment(text)) is not None
    ]
    _set_segs(conn, found)


def _resegment(conn: sqlite3.Connection) -> None:
    """Give every row whose ``seg`` is not what ``symbols.seg`` makes of its text now its
    new one, and re-index those rows (the others are left as they are)."""
    changed = [
        (doc_id, new)
        for doc_id, text, old in conn.execute("SELECT id, text, seg FROM doc")
        if (new := symbols.seg(text)) != old
    ]
    _set_segs(conn, changed)


#: The full-text index as migration 2 made it: what ``reset_index`` makes again when the
#: table was dropped (``tether doctor`` names it ``fts-missing``).
FTS_TABLE = """
    CREATE VIRTUAL TABLE doc_fts USING fts5 (
        body,
        aside,
        content = 'doc',
        content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )
"""

#: The version the symbol tokens' migration reaches (its script's place in MIGRATIONS).
SYMBOLS_VERSION = MIGRATIONS.index(_SYMBOLS) + 1

#: Work a migration needs beyond SQL, run in its transaction after its script: version
#: reached -> what to run.
AFTER: dict[int, Callable[[sqlite3.Connection], None]] = {
    4: _segment_existing,
    SYMBOLS_VERSION: _resegment,
}


def statements(script: str) -> Iterator[str]:
    """Split a migration script into statements (``;`` inside a trigger body is kept)."""
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n\t;"):
                yield buf
            buf = ""
    if buf.strip(" \n\t;"):
        raise ValueError(f"incomplete statement in migration: {buf.strip()[:60]!r}")


def migrate(
    path: Path,
    transaction: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
    scripts: Sequence[str],
    *,
    version: Callable[[sqlite3.Connection], int],
    set_version: Callable[[sqlite3.Connection, int], object],
    after: Mapping[int, Callable[[sqlite3.Connection], None]] | None = None,
) -> None:
    """Bring a schema to ``len(scripts)``: ``scripts[n]`` takes it from n to n + 1, each
    in its own ``transaction()`` with the version read again inside it (another process
    may have migrated meanwhile), then ``after[n + 1]`` and the new version. A version
    beyond the scripts raises StoreVersionError, with nothing changed."""
    while True:
        with transaction() as c:
            current = version(c)
            if current > len(scripts):
                raise StoreVersionError(path, current, len(scripts))
            if current == len(scripts):
                return
            for statement in statements(scripts[current]):
                c.execute(statement)
            hook = (after or {}).get(current + 1)
            if hook is not None:
                hook(c)
            set_version(c, current + 1)
