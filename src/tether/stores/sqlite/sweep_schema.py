"""The sweep's SQLite schema (its own migration track; the rows are read by ``sweep``).

``SWEEP_MIGRATIONS[n]`` takes the sweep tables from version n to n + 1, recorded in the
one-row table ``sweep_schema_version``, independent of the main store's
``PRAGMA user_version``. Append a script for every change; never edit a shipped one.
"""

from __future__ import annotations

SWEEP_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sweep_owner (
        id TEXT PRIMARY KEY,
        timezone TEXT NOT NULL,
        account_generation INTEGER NOT NULL,
        source_generation INTEGER NOT NULL,
        receipt_namespace INTEGER NOT NULL,
        first_date TEXT NOT NULL,
        created_at TEXT NOT NULL,
        deleted_at TEXT
    ) WITHOUT ROWID;

    CREATE TABLE sweep_fact (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        owner TEXT NOT NULL,
        subject TEXT NOT NULL,
        entity TEXT NOT NULL,
        text TEXT NOT NULL,
        authority TEXT NOT NULL,
        refs TEXT NOT NULL,
        origin_receipt TEXT,
        active INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    -- One active fact per slot: a duplicate is a constraint error, not a second row.
    CREATE UNIQUE INDEX sweep_fact_slot ON sweep_fact (owner, subject, entity) WHERE active = 1;

    CREATE TABLE sweep_trigger (
        owner TEXT NOT NULL,
        id TEXT NOT NULL,
        condition TEXT NOT NULL,
        authority TEXT NOT NULL,
        provenance TEXT NOT NULL,
        active INTEGER NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (owner, id)
    ) WITHOUT ROWID;

    CREATE TABLE sweep_journal (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        owner TEXT NOT NULL,
        receipt_id TEXT UNIQUE,
        time TEXT NOT NULL,
        who TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        before TEXT,
        after TEXT,
        evidence TEXT NOT NULL
    );
    CREATE INDEX sweep_journal_owner ON sweep_journal (owner, id);

    CREATE TABLE sweep_receipt (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        namespace INTEGER NOT NULL,
        local_date TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('candidate', 'source')),
        source_key TEXT NOT NULL,
        ordinal INTEGER NOT NULL,
        account_generation INTEGER NOT NULL,
        source_generation INTEGER NOT NULL,
        digest TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'committed')),
        claimant TEXT NOT NULL,
        lease_until TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        outcome TEXT,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX sweep_receipt_day ON sweep_receipt
        (owner, namespace, local_date, account_generation, source_generation, state);

    CREATE TABLE sweep_cursor (
        owner TEXT PRIMARY KEY,
        timezone TEXT NOT NULL,
        local_date TEXT NOT NULL,
        window_id TEXT NOT NULL,
        window_start TEXT NOT NULL,
        window_end TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE sweep_stage (
        owner TEXT NOT NULL,
        local_date TEXT NOT NULL,
        source_generation INTEGER NOT NULL,
        window_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        packet BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (owner, local_date, source_generation, window_id)
    ) WITHOUT ROWID;
    """,
    # 2: a counter bumped by every change to facts or owners (triggers, so no write path
    # can forget it): the main store re-indexes the active facts when it moves.
    """
    CREATE TABLE sweep_fact_change (n INTEGER NOT NULL);
    INSERT INTO sweep_fact_change (n) VALUES (0);
    CREATE TRIGGER sweep_fact_ins AFTER INSERT ON sweep_fact
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    CREATE TRIGGER sweep_fact_upd AFTER UPDATE ON sweep_fact
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    CREATE TRIGGER sweep_fact_del AFTER DELETE ON sweep_fact
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    CREATE TRIGGER sweep_owner_ins AFTER INSERT ON sweep_owner
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    CREATE TRIGGER sweep_owner_upd AFTER UPDATE ON sweep_owner
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    CREATE TRIGGER sweep_owner_del AFTER DELETE ON sweep_owner
        BEGIN UPDATE sweep_fact_change SET n = n + 1; END;
    """,
    # 3: a fact's visibility, as a page has one: ``private`` (the default, and every fact
    # written before) never leaves the home; ``world`` may be shown to a remote MCP client.
    """
    ALTER TABLE sweep_fact ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private'
        CHECK (visibility IN ('private', 'world'));
    """,
)
