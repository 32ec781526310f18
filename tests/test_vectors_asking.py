"""Fused recall with the question embedded on the vectors' worker thread and its vector
kept for the next time it is asked (``memory.vectors``): the hits are the ones a fresh
``Vectors`` gives, a question asked again still finds what was added since, and recalls
from several threads at once rank as one at a time. The model is the real one."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

import pg_helpers
from conftest import Ticker
from tether.config import load_config
from tether.daemon.vectors import open_vectors
from tether.memory.indexer import index_home
from tether.memory.recall import recall, recall_sessions
from tether.memory.vectors import Vectors, embed_missing
from tether.ports import Store
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores import open_store
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    NEEDS_VECTORS,
]

BASE = Baseline(system="You are tether.", memory="")
NOW = datetime(2026, 12, 1, tzinfo=UTC)
CHAT = [
    ("I finally signed up for Apple TV+ last night to watch Severance.", "Enjoy the show!"),
    ("My tomatoes have yellow leaves again.", "That is often overwatering."),
    ("The car makes a squeal when I brake.", "Worn brake pads usually squeal."),
    ("Remind me to call grandma on Sunday.", "I will remind you on Sunday."),
    ("I ran 5 km this morning in 31 minutes.", "Nice pace for a morning run."),
    ("Our cat knocked a glass off the table.", "Cats love doing that."),
]
QUESTIONS = [
    "which streaming service did I subscribe to?",
    "what is wrong with my garden plants",
    "brake noise",
    "how fast did I run",
    "what did the cat do",
]


@pytest.fixture
def store(home: Path, backend: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        (home / "tether.toml").write_text(
            f'[store]\nurl = "{url}"\nowner = "{pg_helpers.new_owner()}"\n'
        )
    s = open_store(home, load_config(home))
    yield s
    s.close()


@pytest.fixture
def vectors(home: Path, store: Store, tick: Ticker) -> Iterator[Vectors]:
    s = Session.create(home, "s0", baseline=BASE, slot=0, time=tick())
    for user, reply in CHAT:
        s.append(User(time=tick(), text=user))
        s.append(Assistant(time=tick(), text=reply))
    index_home(home, store)
    v = open_vectors(home, load_config(home))
    assert v is not None
    embed_missing(v)
    assert v.complete
    yield v
    v.index.close()


def _ranked(store: Store, vectors: Vectors, question: str) -> list[tuple[str, float]]:
    return [(h.ref, h.score) for h in recall(store, question, 4, time=NOW, vectors=vectors)]


def _sessions(store: Store, vectors: Vectors, question: str) -> list[tuple[str, float]]:
    found = recall_sessions(store, question, 2, time=NOW, vectors=vectors)
    return [(s.session, s.score) for s in found]


def test_a_question_asked_again_ranks_as_a_fresh_one_and_finds_what_was_added(
    store: Store, vectors: Vectors
) -> None:
    question = QUESTIONS[0]
    first = _ranked(store, vectors, question)
    assert first[0][0] == "turn:s0:1"
    assert _ranked(store, vectors, question) == first  # asked again: the same hits, scores
    # The kept vector is the model's own, bit for bit.
    assert np.array_equal(vectors.embed_question(question), vectors.embedder.embed([question]))

    note = "I cancelled Netflix and kept only the streaming service from Apple."
    store.add_note(note, untrusted=False, session=None, time=NOW)
    assert not vectors.refresh().complete
    embed_missing(vectors)
    again = _ranked(store, vectors, question)
    assert any(ref.startswith("note:") for ref, _ in again)  # the new note is found
    fresh = Vectors(vectors.embedder, vectors.index)  # keeps nothing yet
    assert again == _ranked(store, fresh, question)
    assert _sessions(store, vectors, question) == _sessions(store, fresh, question)


def test_recalls_from_several_threads_at_once_rank_as_one_at_a_time(
    store: Store, vectors: Vectors
) -> None:
    """An MCP server or the ui serves several recalls at once over one ``Vectors``."""
    alone = {q: (_ranked(store, vectors, q), _sessions(store, vectors, q)) for q in QUESTIONS}
    fresh = Vectors(vectors.embedder, vectors.index)
    asks = QUESTIONS * 4
    with ThreadPoolExecutor(4) as pool:
        together = list(
            pool.map(lambda q: (_ranked(store, fresh, q), _sessions(store, fresh, q)), asks)
        )
    assert together == [alone[q] for q in asks]
