"""The SQL dialect the repositories are written in (``stores/dialect.py``): one statement
text runs on both backends. Real SQLite here; the PostgreSQL lane of the same statements
is every contract suite's (``any_store``)."""

from __future__ import annotations

import sqlite3

from tether.stores.dialect import POSTGRES, SQLITE, Sql, upsert


def test_a_statement_is_written_once_with_question_marks() -> None:
    text = "SELECT count(*) FROM note WHERE text LIKE '%tea%' AND id > ?"
    assert SQLITE.sql(text) is text
    assert POSTGRES.sql(text) == "SELECT count(*) FROM note WHERE text LIKE '%%tea%%' AND id > %s"


def test_a_list_match_is_one_parameter_on_postgresql() -> None:
    assert SQLITE.any_of("session", ["a", "b"]) == ("session IN (?, ?)", ("a", "b"))
    assert POSTGRES.any_of("session", ["a", "b"]) == ("session = ANY(?)", (["a", "b"],))


def test_an_upsert_replaces_every_column_but_the_key() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, a TEXT, b INTEGER)")
    db = Sql(conn, SQLITE)
    statement = upsert("t", ("k", "a", "b"), ("k",))
    db.execute(statement, ("x", "first", 1))
    db.execute(statement, ("x", "second", 2))
    assert db.all("SELECT k, a, b FROM t") == [("x", "second", 2)]
    assert db.count("DELETE FROM t WHERE k = ?", ("x",)) == 1


def test_holding_a_key_runs_nothing_on_sqlite() -> None:
    """SQLite's write transaction already holds the file (PostgreSQL's lock is the
    contract suites', where two callers at once must take turns)."""
    conn = sqlite3.connect(":memory:")
    ran: list[str] = []
    conn.set_trace_callback(ran.append)
    Sql(conn, SQLITE).hold("owner/alice")
    assert ran == []
