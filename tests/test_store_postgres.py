"""PostgreSQL as a user meets it: ``[store] url`` in tether.toml, tenancy between owners
sharing one database, ``tether store migrate`` run twice at once, a schema newer than
this tether refused (exit 2), and a connection killed by the server mid-work.

Every test here needs a server (``TETHER_TEST_POSTGRES``); the contract suites that run
on both backends are tests/test_store_sqlite.py and tests/test_sweep_store.py."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import psycopg
import pytest

import pg_helpers
from conftest import LEXICAL_PIN
from daemon_helpers import spawn, tether
from search_helpers import words
from tether.core.sweep.state import Fact, Owner
from tether.errors import StoreError
from tether.home import init_home
from tether.records import (
    IndexCursor,
    JournalEntry,
    LogRow,
    Page,
    SearchQuery,
    SearchTerm,
    TextCell,
)
from tether.stores.postgres import PostgresStore
from tether.stores.postgres import conn as postgres_conn
from tether.stores.postgres import schema as postgres_schema
from tether.stores.postgres.conn import PgPool
from tether.stores.postgres.sweep import PostgresSweepStore
from tether.stores.postgres.sweep_schema import SWEEP, SWEEP_MIGRATIONS

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


def pg_home(tmp_path: Path, name: str, url: str, owner: str) -> Path:
    home = tmp_path / name
    init_home(home)
    # Lexical, as conftest's home fixture pins it: these tests are about tenancy, and
    # embedding in every command of them costs minutes on a loaded machine (fused recall
    # finds nothing for a question related to nothing too: test_vectors_on).
    (home / "tether.toml").write_text(f'[store]\nurl = "{url}"\nowner = "{owner}"\n' + LEXICAL_PIN)
    return home


def ok(home: Path, *args: str, input: str | None = None) -> str:
    out = tether(home, *args, input=input)
    assert out.returncode == 0, out.stderr
    return out.stdout


def put_fact(url: str, owner: str, text: str) -> None:
    with PostgresSweepStore(url, owner) as sweep, sweep.transaction() as tx:
        if tx.owner("owner") is None:
            tx.put_owner(
                Owner(
                    id="owner",
                    timezone_name="UTC",
                    first_date=date(2026, 10, 31),
                    created_at=T0,
                )
            )
        tx.put_fact(
            Fact(
                owner="owner",
                subject="owner",
                entity=text.split(maxsplit=1)[0].lower(),
                text=text,
                authority="owner_explicit",
                refs="[]",
                origin_receipt=None,
                created_at=T0,
                updated_at=T0,
                visibility="world",
            )
        )


def test_two_owners_in_one_database_never_see_each_others_memory(
    tmp_path: Path, pg_url: str
) -> None:
    a_owner, b_owner = pg_helpers.new_owner("a"), pg_helpers.new_owner("b")
    alice = pg_home(tmp_path, "alice", pg_url, a_owner)
    bob = pg_home(tmp_path, "bob", pg_url, b_owner)
    ok(alice, "memory", "note", "the kayak is kept in the blue shed")
    ok(alice, "page", "write", "boats/kayak", "--visibility", "world", input="Kayak Marigold.\n")
    put_fact(pg_url, a_owner, "Kayaking every Saturday at the lake")
    ok(bob, "memory", "note", "bob keeps bees behind the garage")

    def recall(home: Path, query: str) -> list[str]:
        return [h["text"] for h in json.loads(ok(home, "memory", "recall", query, "--json"))]

    assert any("blue shed" in t for t in recall(alice, "kayak"))
    assert any("Saturday" in t for t in recall(alice, "kayaking saturday"))
    assert recall(bob, "kayak") == []
    assert recall(bob, "kayaking saturday") == []
    assert recall(alice, "bees garage") == []
    assert json.loads(ok(bob, "page", "list", "--json")) == []
    assert [p["slug"] for p in json.loads(ok(alice, "page", "list", "--json"))] == ["boats/kayak"]
    bob_journal = json.dumps(json.loads(ok(bob, "memory", "journal", "--json")))
    assert "kayak" not in bob_journal
    assert "bees" in bob_journal
    assert "bees" not in json.dumps(json.loads(ok(alice, "memory", "journal", "--json")))
    out_b = tmp_path / "bob-context.md"
    ok(bob, "compile-context", "--target", "claude-code", "--out", str(out_b))
    assert "Marigold" not in out_b.read_text()
    out_a = tmp_path / "alice-context.md"
    ok(alice, "compile-context", "--target", "claude-code", "--out", str(out_a))
    assert "Marigold" in out_a.read_text()
    # Each owner's sweep sees its own owners and facts only.
    with PostgresSweepStore(pg_url, b_owner) as sweep, sweep.transaction(write=False) as tx:
        assert tx.active_facts() == []


def test_owners_on_one_shared_pool_never_see_each_others_rows(pg_url: str) -> None:
    # A sweep worker's stores share one pool: here one connection, so every owner's
    # transaction runs on the connection the other's just used.
    a_owner, b_owner = pg_helpers.new_owner("a"), pg_helpers.new_owner("b")
    with PgPool(pg_url, max_size=1) as pool:
        a, b = PostgresStore(pg_url, a_owner, pool=pool), PostgresStore(pg_url, b_owner, pool=pool)
        a_sweep = PostgresSweepStore(pg_url, a_owner, pool=pool)
        b_sweep = PostgresSweepStore(pg_url, b_owner, pool=pool)
        a.add_note("the kayak is kept in the blue shed", untrusted=False, session=None, time=T0)
        b.add_note("bob keeps bees behind the garage", untrusted=False, session=None, time=T0)
        with a_sweep.transaction() as tx:
            tx.put_owner(Owner(id="o1", timezone_name="UTC", first_date=T0.date(), created_at=T0))

        def broken() -> None:
            with b_sweep.transaction() as tx:
                tx.put_owner(
                    Owner(id="o2", timezone_name="UTC", first_date=T0.date(), created_at=T0)
                )
                raise RuntimeError("cut short")

        with pytest.raises(RuntimeError):
            broken()  # rolled back: its path went with it
        assert [h.text for h in a.search(words("kayak"), 5)] == [
            "the kayak is kept in the blue shed"
        ]
        assert a.search(words("bees"), 5) == []
        assert b.search(words("kayak"), 5) == []
        assert [n.text for n in b.notes()] == ["bob keeps bees behind the garage"]
        with a_sweep.transaction(write=False) as tx:
            assert [o.id for o in tx.owners()] == ["o1"]
        with b_sweep.transaction(write=False) as tx:
            assert tx.owners() == []
        # Outside a store's transaction the shared connection names no schema at all.
        with pool.pool.connection() as conn, pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT count(*) FROM note")
        # A connection the server cut is replaced and the retry sets the path again.
        _kill_others(pg_url, a_owner)
        b.add_note("a second note", untrusted=False, session=None, time=T0)
        assert sorted(n.text for n in b.notes()) == [
            "a second note",
            "bob keeps bees behind the garage",
        ]
        assert [n.text for n in a.notes()] == ["the kayak is kept in the blue shed"]
        for store in (a, b, a_sweep, b_sweep):
            store.close()
        assert pool.stats()["pool_max"] == 1


def test_migrate_is_idempotent_and_two_at_once_are_safe(tmp_path: Path, pg_url: str) -> None:
    home = pg_home(tmp_path, "h", pg_url, pg_helpers.new_owner())
    procs = [spawn(home, "store", "migrate", "--json") for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    for stdout, _ in outs:
        info = json.loads(stdout)
        assert (info["backend"], info["level"], info["known"]) == (
            "postgresql",
            postgres_schema.KNOWN,
            postgres_schema.KNOWN,
        )
        assert info["server_version"]
    assert json.loads(ok(home, "store", "migrate", "--json"))["level"] == postgres_schema.KNOWN
    report = json.loads(tether(home, "doctor", "--json").stdout)
    assert report["store"]["backend"] == "postgresql"
    assert report["store"]["level"] == postgres_schema.KNOWN


def test_a_schema_newer_than_this_tether_is_refused_untouched(tmp_path: Path, pg_url: str) -> None:
    owner = pg_helpers.new_owner()
    home = pg_home(tmp_path, "h", pg_url, owner)
    ok(home, "memory", "note", "written before the upgrade")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'UPDATE "tether_{owner}".schema_version SET version = 99')
    for args in (("store", "migrate"), ("memory", "recall", "upgrade"), ("serve",)):
        out = tether(home, *args, timeout=30)
        assert out.returncode == 2, (args, out.stderr)
        assert "schema version 99 is newer than this tether knows" in out.stderr
        assert "Traceback" not in out.stderr
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(f'SELECT count(*) FROM "tether_{owner}".note').fetchone()
        assert row == (1,)
        conn.execute(
            f'UPDATE "tether_{owner}".schema_version SET version = {postgres_schema.KNOWN}'
        )


def _kill_others(url: str, owner: str) -> None:
    """Terminate every server backend of this database that is not this connection."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_a_connection_killed_before_commit_is_retried_and_applied_once(pg_url: str) -> None:
    owner = pg_helpers.new_owner()
    with PostgresStore(pg_url, owner) as store:
        store.add_note("before", untrusted=False, session=None, time=T0)
        _kill_others(pg_url, owner)  # every pooled connection is dead now
        entry = store.journal_append(
            JournalEntry(
                time=T0, who="owner", session=None, action="note", target="x", before=None,
                after="once",
            )
        )  # fmt: skip
        assert entry.id == 1
        assert [e.after for e in store.journal()] == ["once"]
        assert [n.text for n in store.notes()] == ["before"]
        assert [h.text for h in store.search(words("before"), 5)] == ["before"]


def test_a_connection_killed_inside_a_sweep_transaction_rolls_it_all_back(pg_url: str) -> None:
    owner = pg_helpers.new_owner()
    with PostgresSweepStore(pg_url, owner) as sweep:

        def cut_mid_transaction() -> None:
            with sweep.transaction() as tx:
                tx.put_owner(
                    Owner(
                        id="o1", timezone_name="UTC", first_date=date(2026, 10, 31), created_at=T0
                    )
                )
                killer = threading.Thread(target=_kill_others, args=(pg_url, owner))
                killer.start()
                killer.join()
                tx.owners()  # the server has cut this connection

        with pytest.raises(StoreError, match="sweep transaction"):
            cut_mid_transaction()
        with sweep.transaction(write=False) as tx:
            assert tx.owners() == []  # nothing half-applied
        with sweep.transaction() as tx:  # and the store works on
            tx.put_owner(
                Owner(id="o1", timezone_name="UTC", first_date=date(2026, 10, 31), created_at=T0)
            )
        with sweep.transaction(write=False) as tx:
            assert [o.id for o in tx.owners()] == ["o1"]


def test_connections_killed_while_pooled_are_replaced_not_reported(pg_url: str) -> None:
    # A sweep worker's pool outlives server restarts: a connection the server terminated
    # while it sat in the pool is replaced before a transaction, a listing of the owners
    # or a store's migration check runs on it.
    owner = pg_helpers.new_owner("live")
    with PgPool(pg_url, max_size=2) as pool:
        sweep = PostgresSweepStore(pg_url, owner, pool=pool)
        with sweep.transaction() as tx:
            tx.put_owner(Owner(id="o1", timezone_name="UTC", first_date=T0.date(), created_at=T0))
        with sweep.transaction(write=False) as a, sweep.transaction(write=False) as b:
            assert [o.id for o in a.owners()] == [o.id for o in b.owners()] == ["o1"]
        for step in ("transaction", "owners", "open"):
            _kill_others(pg_url, owner)  # both pooled connections are dead now
            if step == "transaction":
                with sweep.transaction(write=False) as tx:
                    assert [o.id for o in tx.owners()] == ["o1"]
            elif step == "owners":
                assert postgres_conn.schema_of(owner) in [
                    postgres_conn.schema_of(o) for o in pool.owner_schemas()
                ]
            else:
                store = PostgresStore(pg_url, owner, pool=pool)
                store.add_note("after the restart", untrusted=False, session=None, time=T0)
                assert [n.text for n in store.notes()] == ["after the restart"]


def _df(url: str, owner: str) -> tuple[dict[str, int], dict[str, int]]:
    """``term_df`` (its non-zero counts) and the same counted from the rows themselves."""
    with psycopg.connect(url) as conn:
        conn.execute(f'SET search_path TO "tether_{owner}"')
        kept: dict[str, int] = dict(
            conn.execute("SELECT term, n FROM term_df WHERE n <> 0").fetchall()
        )
        counted: dict[str, int] = dict(
            conn.execute(
                "SELECT u.lexeme, count(*) FROM doc, unnest(doc.tsv) AS u GROUP BY u.lexeme"
            ).fetchall()
        )
    return kept, counted


def test_term_counts_follow_every_write_and_a_migration_fills_them(pg_url: str) -> None:
    owner = pg_helpers.new_owner()
    log = [
        LogRow(session="s1", epoch=0, turn=i, field="user", text=t, tainted=False, time=T0)
        for i, t in enumerate(["apple pie and apple tart", "pear tart", "plum jam"], start=1)
    ]
    page = Page("p", "Orchard", "apple trees", ("fruit",), "private", False, T0)
    with PostgresStore(pg_url, owner) as store:
        store.index_log_rows(
            log, IndexCursor(path="s1/0.jsonl", offset=9, turn=3, tainted=False, lines=3)
        )
        store.add_note("pear cider", untrusted=False, session=None, time=T0)
        store.put_page(page)
        store.put_page(Page("p", "Orchard", "plum trees", ("fruit",), "private", False, T0))
        cells: list[TextCell] = []
        store.read_cells(cells.append)
        note = next(c for c in cells if c.table == "doc" and c.text == "pear cider")
        assert store.rewrite_cells([(note, "quince cider")])[0] == [True]
        kept, counted = _df(pg_url, owner)
        assert kept == counted
        assert kept["appl"] == 1
        assert kept["tart"] == 2
        assert "pear" in kept
        assert "quinc" in kept
        assert kept["pear"] == 1
        store.delete_page("p")
        kept, counted = _df(pg_url, owner)
        assert kept == counted
        assert "orchard" not in kept
        queries = [
            SearchQuery((SearchTerm("tart"),)),
            SearchQuery((SearchTerm("apple"),)),
            SearchQuery((SearchTerm("tar", kind="prefix"),)),
            SearchQuery((SearchTerm("pear tart", kind="phrase"),)),
        ]
        assert store.count_matches(queries, 10) == [2, 1, 2, 1]
        assert store.count_matches(queries, 1) == [1, 1, 1, 1]
    # A schema at the level before the counts: migrating fills them from the rows.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "tether_{owner}"')
        conn.execute("DROP TABLE term_df")
        for name in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER doc_df_{name} ON doc")
            conn.execute(f"DROP FUNCTION tether_df_{name}()")
        conn.execute("DROP FUNCTION tether_df_move(bigint, text[])")
        # What the later migrations made goes too, so they run again as on such a schema.
        for column in ("size", "mtime_ns", "ino", "tail"):  # the logs' states (version 5)
            conn.execute(f"ALTER TABLE index_cursor DROP COLUMN {column}")
        before = postgres_schema.TERM_DF_VERSION - 1
        conn.execute(f"UPDATE schema_version SET version = {before}")
    with PostgresStore(pg_url, owner) as store:
        assert store.schema_version() == postgres_schema.KNOWN
    kept, counted = _df(pg_url, owner)
    assert kept == counted
    assert kept["tart"] == 2


# -- the sweep's own migration track -----------------------------------------------------


def _tables(url: str, owner: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (f"tether_{owner}",)
        ).fetchall()
    return {r[0] for r in rows}


def test_the_main_schema_names_no_sweep_table_and_the_sweep_makes_its_own(pg_url: str) -> None:
    owner = pg_helpers.new_owner()
    with PostgresStore(pg_url, owner) as main:
        main.add_note("the main store alone", untrusted=False, session=None, time=T0)
    assert not {t for t in _tables(pg_url, owner) if t.startswith("sweep_")}
    with PostgresSweepStore(pg_url, owner) as sweep:
        assert sweep.schema_version() == SWEEP.known
    assert {"sweep_owner", "sweep_claim", "sweep_model_stage", "sweep_schema_version"} <= (
        _tables(pg_url, owner)
    )
    put_fact(pg_url, owner, "a fact after the sweep made its tables")
    with PostgresSweepStore(pg_url, owner) as again, again.transaction(write=False) as tx:
        assert again.schema_version() == SWEEP.known  # nothing made twice
        assert [f.text for f in tx.active_facts()] == ["a fact after the sweep made its tables"]


def test_a_schema_whose_main_track_made_the_sweep_tables_is_adopted(pg_url: str) -> None:
    """Before the sweep had its own track, the main track's first two levels made its
    tables: such a schema keeps its rows and gets nothing made again."""
    owner = pg_helpers.new_owner()
    with PostgresStore(pg_url, owner):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute(f'SET LOCAL search_path TO "tether_{owner}"')
        for script in SWEEP_MIGRATIONS:  # what the main track ran then
            conn.execute(script.encode())
    put_fact(pg_url, owner, "kept from before")
    with PostgresSweepStore(pg_url, owner) as sweep, sweep.transaction(write=False) as tx:
        assert sweep.schema_version() == SWEEP.known
        assert [f.text for f in tx.active_facts()] == ["kept from before"]
    assert "sweep_schema_version" not in _tables(pg_url, owner)  # adopted as it stands
