"""Vectors where they are on: ``sessions import`` and ``transcripts ingest`` embed what
they add, ``memory recall`` embeds a few missing rows first (or says it is lexical), and
a hook's banked window ends up embedded, by the hook or by the next recall. Real child
processes, real SQLite, the real MiniLM model (the extra tether[vectors]); without the
extra, ``test_vectors_absent`` checks that nothing changes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_helpers import TETHER_SESSION, Transcript, heartbeat, hook, payload
from conftest import Ticker
from daemon_helpers import spawn, tether
from tether.cli.embedding import PAUSE_BEFORE_EMBED
from tether.home import init_home
from tether.memory.readiness import RECALL_EMBED_ROWS
from tether.records import Baseline, User
from tether.sessions import Session
from tether.testing.pause import release, wait_reached
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    NEEDS_VECTORS,
]

APPLE = "I finally signed up for Apple TV+ last night so I can watch Severance."
OTHERS = [
    "My tomatoes have yellow leaves again.",
    "The car makes a squeal when I brake.",
    "Remind me to call grandma on Sunday.",
    "Our cat knocked a glass off the table.",
]
QUESTION = "which streaming service did I subscribe to?"


def lexical(home: Path) -> list[str]:
    """The lines of ``doctor`` that say recall is lexical."""
    out = tether(home, "doctor", timeout=120)
    return [ln for ln in (out.stdout + out.stderr).splitlines() if "recall is lexical" in ln]


def recall(home: Path, query: str) -> tuple[list[dict[str, Any]], str]:
    out = tether(home, "memory", "recall", query, "-k", "3", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, Any]] = json.loads(out.stdout)
    return hits, out.stderr


def test_an_import_embeds_what_it_adds(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "chat.jsonl"
    lines = [
        {"session": "s1", "role": "user", "text": t, "time": f"2026-11-0{i + 1}T10:00:00Z"}
        for i, t in enumerate([*OTHERS, APPLE])
    ]
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tether(home, "sessions", "import", str(source), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "6 rows embedded" in out.stdout  # 5 turns and the session's digest
    assert lexical(home) == []
    hits, said = recall(home, QUESTION)
    assert hits[0]["text"] == APPLE  # no word in common: found by meaning
    assert said == ""


def test_a_question_related_to_nothing_finds_nothing(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "chat.jsonl"
    lines = [
        {"session": "s1", "role": "user", "text": t, "time": f"2026-11-0{i + 1}T10:00:00Z"}
        for i, t in enumerate([*OTHERS, APPLE])
    ]
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tether(home, "sessions", "import", str(source), timeout=120)
    assert out.returncode == 0, out.stderr
    assert lexical(home) == []  # fused recall, not lexical
    # No word in common with anything, and nothing near it in meaning: not the nearest
    # unrelated turns.
    for nonsense in ("zebrafish migration", "quantum chromodynamics lattice gauge"):
        hits, said = recall(home, nonsense)
        assert hits == [], nonsense
        assert said == ""
        plain = tether(home, "memory", "recall", nonsense, timeout=120)
        assert plain.stdout.strip() == "no matches"
        sessions = tether(home, "memory", "recall", nonsense, "--sessions", "--json", timeout=120)
        assert json.loads(sessions.stdout) == []
    # Near in meaning with no word in common is still found.
    hits, _ = recall(home, QUESTION)
    assert [h["text"] for h in hits] == [APPLE]


def _rows(home: Path, tick: Ticker, texts: list[str]) -> None:
    s = Session.create(home, "s1", baseline=Baseline(system="x", memory=""), slot=0, time=tick())
    for text in texts:
        s.append(User(time=tick(), text=text))


def test_recall_embeds_a_few_missing_rows_before_it_answers(home: Path, tick: Ticker) -> None:
    _rows(home, tick, [*OTHERS, APPLE])  # written, never indexed nor embedded
    hits, said = recall(home, QUESTION)
    assert hits[0]["text"] == APPLE
    assert said == ""
    assert lexical(home) == []


def test_recall_with_many_rows_missing_answers_and_says_so_once(home: Path, tick: Ticker) -> None:
    many = [f"note number {i} about the garden shed" for i in range(RECALL_EMBED_ROWS + 5)]
    _rows(home, tick, [*many, APPLE])
    hits, said = recall(home, "Apple TV+ Severance")
    assert hits[0]["text"] == APPLE  # answered, lexically
    warnings = said.splitlines()
    assert len(warnings) == 1
    # every turn's row and the session's digest (core.recall.summaries)
    assert f"recall is lexical: {RECALL_EMBED_ROWS + 7} rows of" in warnings[0]
    assert "tether memory reindex --vectors" in warnings[0]
    assert len(lexical(home)) == 1  # nothing was embedded behind its back
    done = tether(home, "memory", "reindex", "--vectors", timeout=300)
    assert done.returncode == 0, done.stderr
    _, quiet = recall(home, "Apple TV+ Severance")
    assert quiet == ""


def _window(tmp_path: Path) -> Transcript:
    t = Transcript(tmp_path / "t.jsonl")
    t.user(APPLE)
    t.assistant("Enjoy the show!")
    t.user("The car makes a squeal when I brake.")
    t.assistant("Worn brake pads usually squeal.")
    return t


def test_a_hooks_window_is_embedded_by_the_hook(home: Path, tmp_path: Path) -> None:
    t = _window(tmp_path)
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert run.returncode == 0, run.stderr
    beat = heartbeat(home)[-1]
    assert beat["recall"] == "recall_indexed"
    # Within the 3 s deadline on a quiet machine; on a loaded one the next recall does it.
    assert beat["vectors"] in ("embedded", "deferred")
    if beat["vectors"] == "embedded":
        assert lexical(home) == []
    hits, said = recall(home, QUESTION)
    assert hits[0]["session"] == TETHER_SESSION
    assert hits[0]["text"] == APPLE
    assert said == ""
    assert lexical(home) == []


def test_a_hook_out_of_time_leaves_its_vectors_to_the_next_recall(
    home: Path, tmp_path: Path
) -> None:
    # Enough to index a small window, too little to load the model and embed a batch.
    (home / "tether.toml").write_text("[checkpoint]\ndeadline_s = 1.2\n")
    t = _window(tmp_path)
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert run.returncode == 0, run.stderr
    beat = heartbeat(home)[-1]
    if beat["recall"] != "recall_indexed":
        pytest.skip(f"this machine could not even index within 1.2 s ({beat['recall']})")
    assert beat["vectors"] == "deferred"
    assert len(lexical(home)) == 1
    hits, said = recall(home, QUESTION)
    assert hits[0]["text"] == APPLE
    assert said == ""
    assert lexical(home) == []


def test_transcripts_ingest_embeds_what_it_adds(home: Path, tmp_path: Path) -> None:
    t = _window(tmp_path)
    out = tether(home, "transcripts", "ingest", str(t.path), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "4 rows embedded for recall" in out.stdout
    assert lexical(home) == []


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 4 MiB tmpfs (as in ``test_disk_full``), unmounted afterwards."""
    root = Path(tempfile.mkdtemp(prefix="thvec", dir="/tmp"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        root.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
        root.rmdir()


def _fill(root: Path) -> Path:
    filler = root / "filler"
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as f:
        while True:
            f.write(b"\0")  # the last few bytes too
    return filler


@pytest.mark.slow
def test_a_full_disk_while_embedding_leaves_the_import_done_and_says_so(
    small_disk: Path, tmp_path: Path
) -> None:
    home = small_disk / "h"
    init_home(home)
    source = tmp_path / "chat.jsonl"
    lines = [
        {"session": "s1", "role": "user", "text": t, "time": f"2026-11-0{i + 1}T10:00:00Z"}
        for i, t in enumerate([*OTHERS, APPLE])
    ]
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    pause = tmp_path / "pause"
    pause.mkdir()
    child = spawn(
        home,
        "sessions",
        "import",
        str(source),
        env={"TETHER_PAUSE_AT": PAUSE_BEFORE_EMBED, "TETHER_PAUSE_DIR": str(pause)},
    )
    assert wait_reached(pause, PAUSE_BEFORE_EMBED, timeout=60)
    filler = _fill(small_disk)
    release(pause, PAUSE_BEFORE_EMBED)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert "imported 5 records" in out
    assert "embedded" not in out
    assert "the rows were imported but not embedded" in err
    assert "tether memory reindex --vectors" in err
    assert "Traceback" not in err
    filler.unlink()
    assert any("0 of 6 rows have vectors" in ln for ln in lexical(home))  # 5 turns, 1 digest
    hits, said = recall(home, QUESTION)  # a few rows: embedded before it answers
    assert hits[0]["text"] == APPLE
    assert said == ""
