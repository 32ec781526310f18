"""The approximate graph over the vectors at scale (stores/vector_graph.py, through
``VectorIndex.maintain``): what it finds agrees with the exact search, scores still come
from the table, rows added after it was built and rows gone since are handled, it is
saved beside the store and reused after a restart, and a damaged or foreign graph file is
rebuilt rather than trusted.

The store is real (a home with imported turns, SQLite); the vectors are our own
clustered unit vectors, and the graph is grown from a few thousand of them (the
product's threshold, ``GRAPH_FROM``, is lowered for the test: it is a constructor
argument).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("faiss")

from tether.config import Config  # noqa: E402
from tether.home import init_home  # noqa: E402
from tether.imports.jsonl import import_jsonl  # noqa: E402
from tether.stores.sqlite import SqliteStore  # noqa: E402
from tether.stores.sqlite.vectors import SqliteVectors  # noqa: E402

pytestmark = pytest.mark.vectors

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = "test-model"
DIM = 32
TURNS = 1_500  # 3,000 rows: a user line and a reply each
SESSIONS = TURNS // 50
ROWS = 2 * TURNS + SESSIONS  # and each session's digest (a summary unit)
GRAPH_FROM = 1_000


def _build_home(root: Path) -> Path:
    home = root / "home"
    init_home(home)
    src = root / "import.jsonl"
    t = T0
    with src.open("w") as f:
        for i in range(TURNS):
            t += timedelta(seconds=30)
            for role, text in (("user", f"question number {i}"), ("assistant", f"answer {i}")):
                stamp = t.strftime("%Y-%m-%dT%H:%M:%SZ")
                row = {"session": f"s{i // 50:04d}", "role": role, "text": text, "time": stamp}
                f.write(json.dumps(row) + "\n")
    store = SqliteStore(home / "tether.db")
    try:
        import_jsonl(home, src, now=T0, config=Config(), store=lambda: nullcontext(store))
    finally:
        store.close()
    return home


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_home(tmp_path_factory.mktemp("graph"))


@pytest.fixture
def home(built_home: Path, tmp_path: Path) -> Path:
    """A copy of the imported home, so each test changes its own."""
    copy = tmp_path / "home"
    shutil.copytree(built_home, copy)
    return copy


def _vectors(n: int, seed: int = 1) -> Any:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM)).astype(np.float32)
    vecs = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _fill(index: SqliteVectors, seed: int = 1) -> dict[int, Any]:
    """One vector for every row that takes one; the vector of each doc id."""
    rows = index.missing_vectors(MODEL, 10_000)
    vecs = _vectors(len(rows), seed)
    index.put_vectors(MODEL, [(r.doc, vecs[i : i + 1]) for i, r in enumerate(rows)])
    return {r.doc: vecs[i] for i, r in enumerate(rows)}


def _queries(n: int = 25) -> Any:
    rng = np.random.default_rng(99)
    q = _vectors(n, seed=7) + 0.2 * rng.standard_normal((n, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _docs(index: SqliteVectors, q: Any, k: int = 10) -> list[tuple[int, float]]:
    return [(f.id, f.score) for f in index.nearest(MODEL, q[None, :], k)]


@pytest.fixture
def opened(home: Path) -> Iterator[SqliteVectors]:
    index = SqliteVectors(home / "tether.db", graph_from=GRAPH_FROM)
    yield index
    index.close()


def test_the_graph_finds_what_the_exact_search_finds_with_the_same_scores(
    home: Path, opened: SqliteVectors
) -> None:
    _fill(opened)
    exact = [_docs(opened, q) for q in _queries()]  # no graph yet: exact
    assert opened.maintain(MODEL) == ROWS
    assert opened.graph_file(MODEL).is_file()
    overlap = []
    for q, want in zip(_queries(), exact, strict=True):
        got = _docs(opened, q)
        assert len(got) == len(want)
        # Every score is the table's own (the graph only proposes candidates).
        for doc, score in got:
            assert score == pytest.approx(dict(want).get(doc, score), abs=1e-6)
        overlap.append(len({d for d, _ in got} & {d for d, _ in want}) / len(want))
    assert np.mean(overlap) >= 0.95, overlap
    assert opened.maintain(MODEL) == 0  # nothing left to add


def test_rows_added_after_the_graph_and_rows_gone_since_are_handled(
    home: Path, opened: SqliteVectors
) -> None:
    vecs = _fill(opened)
    opened.maintain(MODEL)
    q = _queries()[0]
    best = _docs(opened, q, 1)[0][0]
    # The best row is re-embedded (a new vector id the graph never saw) pointing
    # exactly at the question: the tail scan finds it before any maintain.
    opened.put_vectors(MODEL, [(best, q[None, :])])
    doc, score = _docs(opened, q, 1)[0]
    assert doc == best
    assert score == pytest.approx(1.0, abs=0.01)
    # Another row takes the question's vector; its old vector (in the graph) is gone.
    other = next(d for d in vecs if d != best)
    opened.put_vectors(MODEL, [(other, (-q)[None, :])])
    doc, score = _docs(opened, -q, 3)[0]
    assert doc == other
    assert score == pytest.approx(1.0, abs=0.01)
    assert opened.maintain(MODEL) == 2  # the two new vectors join the graph
    assert _docs(opened, -q, 1)[0][0] == other
    assert _docs(opened, q, 1)[0][0] == best


def test_a_saved_graph_is_reused_after_a_restart(home: Path) -> None:
    db = home / "tether.db"
    first = SqliteVectors(db, graph_from=GRAPH_FROM)
    _fill(first)
    first.maintain(MODEL)
    before = [_docs(first, q) for q in _queries()]
    first.close()
    saved = first.graph_file(MODEL)
    stamp = saved.stat().st_mtime_ns

    again = SqliteVectors(db, graph_from=GRAPH_FROM)
    try:
        assert [_docs(again, q) for q in _queries()] == before
        assert again.maintain(MODEL) == 0  # loaded, not rebuilt
        assert saved.stat().st_mtime_ns == stamp
    finally:
        again.close()


def test_a_turns_few_vectors_are_saved_on_close_not_by_rewriting_the_graph(home: Path) -> None:
    db = home / "tether.db"
    index = SqliteVectors(db, graph_from=GRAPH_FROM)
    vecs = _fill(index)
    index.maintain(MODEL)
    saved = index.graph_file(MODEL)
    stamp = saved.stat().st_mtime_ns
    q = _queries()[0]
    doc = next(iter(vecs))
    index.put_vectors(MODEL, [(doc, q[None, :])])  # what one turn adds
    assert index.maintain(MODEL) == 1
    assert saved.stat().st_mtime_ns == stamp  # not the whole file again for one vector
    index.close()
    assert saved.stat().st_mtime_ns != stamp  # saved on close
    again = SqliteVectors(db, graph_from=GRAPH_FROM)
    try:
        assert again.maintain(MODEL) == 0  # the vector is in the saved graph
        assert _docs(again, q, 1)[0][0] == doc
    finally:
        again.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another store's"])
def test_a_damaged_or_foreign_graph_is_rebuilt_not_trusted(
    home: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = home / "tether.db"
    index = SqliteVectors(db, graph_from=GRAPH_FROM)
    _fill(index)
    exact = [_docs(index, q) for q in _queries()]
    index.maintain(MODEL)
    index.close()
    saved = index.graph_file(MODEL)
    if damage == "garbage":
        saved.write_bytes(b"not a graph at all" * 100)
    elif damage == "truncated":
        saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 3])
    else:  # the same ids, other vectors: a graph of another store copied over ours
        other = _build_home(tmp_path / "other")
        theirs = SqliteVectors(other / "tether.db", graph_from=GRAPH_FROM)
        _fill(theirs, seed=2)
        theirs.maintain(MODEL)
        theirs.close()
        shutil.copy(theirs.graph_file(MODEL), saved)

    again = SqliteVectors(db, graph_from=GRAPH_FROM)
    try:
        with caplog.at_level(logging.WARNING, logger="tether.stores.vector_matrix"):
            got = [_docs(again, q) for q in _queries()]
        assert got == exact  # no graph trusted: the exact search
        assert "rebuilding the vector graph" in caplog.text
        assert again.maintain(MODEL) == ROWS  # rebuilt whole
    finally:
        again.close()


def test_a_graph_a_quarter_dead_is_rebuilt_from_the_live_vectors(
    home: Path, opened: SqliteVectors
) -> None:
    vecs = _fill(opened)
    opened.maintain(MODEL)
    # A third of the rows get new vectors: their old ones are dead keys in the graph.
    redone = list(vecs)[: len(vecs) // 3]
    fresh = _vectors(len(redone), seed=5)
    opened.put_vectors(MODEL, [(d, fresh[i : i + 1]) for i, d in enumerate(redone)])
    assert opened.maintain(MODEL) == ROWS  # every live vector, into a new graph
    for i in (0, len(redone) // 2, len(redone) - 1):
        assert _docs(opened, fresh[i], 1)[0][0] == redone[i]


def test_no_graph_below_the_threshold(home: Path) -> None:
    index = SqliteVectors(home / "tether.db", graph_from=10 * TURNS)
    try:
        _fill(index)
        assert index.maintain(MODEL) == 0
        assert not index.graph_file(MODEL).exists()
    finally:
        index.close()
