"""``tether serve`` embeds what reaches it, not only its own turns: rows left without a
vector while it was down (an import whose embedding failed), a window a hook banked but
could not put in its session, and a hook's window it had no time to embed. A real
``tether serve`` child over the fake llama-server, real hooks, real SQLite and the real
MiniLM model (the extra tether[vectors])."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from checkpoint_helpers import Transcript, heartbeat, hook, payload
from daemon_helpers import Daemon, daemon_home
from test_vectors_fronts import _imported
from test_vectors_on import APPLE, OTHERS, QUESTION, lexical
from tether.checkpoint.recallable import transcripts_lock
from tether.config import load_config
from tether.daemon.vectors import open_vectors
from tether.memory.recall import recall
from tether.memory.vectors import Vectors
from tether.stores import open_store
from tether.testing.fake_llama import FakeLlama
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    pytest.mark.slow,
    NEEDS_VECTORS,
]


def wait_for(check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.2)


def _vectors(home: Path) -> Vectors:
    vectors = open_vectors(home, load_config(home))
    assert vectors is not None
    return vectors


def _embedded(vectors: Vectors, at_least: int) -> Callable[[], bool]:
    def check() -> bool:
        counts = vectors.refresh()
        return counts.total >= at_least and counts.complete

    return check


def _first_hit(home: Path, vectors: Vectors) -> str:
    store = open_store(home, load_config(home))
    try:
        hits = recall(store, QUESTION, 1, time=datetime.now(UTC), vectors=vectors)
    finally:
        store.close()
    return hits[0].text


def _window(tmp_path: Path) -> Transcript:
    t = Transcript(tmp_path / "t.jsonl")
    t.user(APPLE)
    t.assistant("Enjoy the show!")
    t.user("The car makes a squeal when I brake.")
    t.assistant("Worn brake pads usually squeal.")
    return t


def test_the_daemon_embeds_at_start_what_was_left_without_vectors(fake: FakeLlama) -> None:
    with daemon_home(fake.url) as home:
        _imported(home, [*OTHERS, APPLE])  # indexed, never embedded
        [said] = lexical(home)
        # 5 turns and the session's digest (a summary unit)
        assert "recall is lexical: 0 of 6 rows have vectors (6 without)" in said
        daemon = Daemon(home)
        vectors = _vectors(home)
        try:
            wait_for(_embedded(vectors, 6))  # no turn, no recall: the daemon's own pass
        finally:
            code, err = daemon.stop()
            vectors.index.close()
        assert code == 0, err
        assert lexical(home) == []


def test_the_daemon_brings_in_a_window_a_hook_banked_while_it_was_down(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        t = _window(tmp_path)
        # An import holds the transcripts' lock: the hook banks its window and defers it.
        with transcripts_lock(home, wait_s=None):
            run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
        assert run.returncode == 0, run.stderr
        assert heartbeat(home)[-1]["recall"] == "recall_deferred"
        daemon = Daemon(home)
        vectors = _vectors(home)
        try:
            wait_for(_embedded(vectors, 4))  # appended, indexed and embedded by the daemon
        finally:
            code, err = daemon.stop()
        assert code == 0, err
        try:
            assert _first_hit(home, vectors) == APPLE  # found by meaning
        finally:
            vectors.index.close()
        assert lexical(home) == []


def test_the_daemon_embeds_a_window_the_hook_had_no_time_to(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        # Enough to index a small window, too little to load the model and embed a batch.
        with (home / "tether.toml").open("a") as f:
            f.write("\n[checkpoint]\ndeadline_s = 1.2\n")
        daemon = Daemon(home)
        vectors = _vectors(home)
        try:
            t = _window(tmp_path)
            run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
            assert run.returncode == 0, run.stderr
            [beat] = [b for b in heartbeat(home) if "recall" in b]  # the hook's line
            if beat.get("vectors") != "deferred":
                pytest.skip(f"the hook did not leave its vectors deferred here: {beat}")
            assert beat["flush"] == "scheduled"
            wait_for(_embedded(vectors, 4))  # the daemon, before the window's harvest
            assert _first_hit(home, vectors) == APPLE
        finally:
            code, err = daemon.stop()
            vectors.index.close()
        assert code == 0, err
