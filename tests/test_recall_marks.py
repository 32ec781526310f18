"""The caught-up marks: a recall with nothing new banked reads no session's ledger, a
window banked since is caught up all the same, and a recall killed around its append
leaves no mark that would hide the window from the next one. Real files, real hooks and
``tether memory recall`` as child processes, an audit hook to see which files a
catch-up opens."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from audit_helpers import opened_files
from checkpoint_helpers import TETHER_SESSION, Transcript, heartbeat, hook, payload
from daemon_helpers import tether
from test_bank_recall import first_window, held
from tether.checkpoint.bank import bank_redacted, corpus_dir, redact_text
from tether.checkpoint.recallable import (
    CRASH_AFTER_APPEND,
    CRASH_BEFORE_APPEND,
    catch_up,
    read_marks,
    transcripts_lock,
)
from tether.core.checkpoints.window import Turn, render

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SIDS = [f"cc-00000000-0000-4000-8000-00000000000{i}" for i in range(1, 5)]


def opens() -> contextlib.AbstractContextManager[list[str]]:
    """The names of the corpus files this process opens inside the block."""
    return opened_files(lambda path: "/corpus/" in path, lambda path: Path(path).name)


def _bank(home: Path, sid: str, n: int, text: str) -> None:
    start = T0 + timedelta(days=n)
    turns = [
        Turn("user", text, start.strftime("%Y-%m-%dT%H:%M:%S.000Z")),
        Turn(
            "assistant",
            f"Noted ({n}).",
            (start + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        ),
    ]
    red = redact_text(render(turns))
    bank_redacted(home, sid, red, what="pre-compact", time=start, source="pre-compact")


@pytest.fixture
def banked(home: Path) -> Path:
    for i, sid in enumerate(SIDS):
        _bank(home, sid, i, f"window {i} of session {sid}: the garden shed roof")
    return home


def _messages(home: Path, sid: str) -> list[str]:
    out = []
    for log in sorted((home / "sessions" / sid).glob("*.jsonl")):
        for line in log.read_text().splitlines():
            r = json.loads(line)
            if r["type"] in ("User", "Assistant"):
                out.append(r["text"])
    return out


def test_a_catch_up_with_nothing_new_reads_no_ledger(banked: Path) -> None:
    home = banked
    assert sorted(catch_up(home, allow=frozenset())) == SIDS  # every window into its session
    assert set(read_marks(home)) == set(SIDS)
    with opens() as opened:
        assert catch_up(home, allow=frozenset()) == []
    assert opened == ["caught-up.json"]  # one file, however many sessions


def test_a_window_banked_after_the_mark_is_caught_up_and_only_its_session_read(
    banked: Path,
) -> None:
    home = banked
    catch_up(home, allow=frozenset())
    _bank(home, SIDS[2], 10, "a later window: the Hydra ferry is booked")
    with opens() as opened:
        assert catch_up(home, allow=frozenset()) == [SIDS[2]]
    read = {name for name in opened if not name.startswith(".")}  # temporaries of writes
    assert read <= {
        "caught-up.json",
        f"{SIDS[2]}.ledger.json",
        f"{SIDS[2]}.recalled.jsonl",
        *(p.name for p in corpus_dir(home).glob(f"{SIDS[2]}.seg-*.txt")),
    }
    assert "a later window: the Hydra ferry is booked" in _messages(home, SIDS[2])
    with opens() as again:
        assert catch_up(home, allow=frozenset()) == []
    assert again == ["caught-up.json"]


def test_a_lost_or_damaged_marks_file_costs_one_full_read(banked: Path) -> None:
    home = banked
    catch_up(home, allow=frozenset())
    (corpus_dir(home) / "caught-up.json").write_text("{not json")
    with opens() as opened:
        assert catch_up(home, allow=frozenset()) == []  # nothing appended twice
    assert f"{SIDS[0]}.ledger.json" in opened
    assert set(read_marks(home)) == set(SIDS)
    assert [len(_messages(home, sid)) for sid in SIDS] == [2, 2, 2, 2]


@pytest.mark.parametrize("point", [CRASH_BEFORE_APPEND, CRASH_AFTER_APPEND])
def test_a_recall_killed_around_its_append_leaves_no_mark_that_hides_the_window(
    home: Path, tmp_path: Path, point: str
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    with transcripts_lock(home, wait_s=None):  # an import holds it: the hook defers
        assert hook(home, "pre-compact", payload("PreCompact", t.path)).returncode == 0
    assert heartbeat(home)[-1]["recall"] == "recall_deferred"
    killed = tether(home, "memory", "recall", "ledger database", env={"TETHER_CRASH_AT": point})
    assert killed.returncode != 0
    assert TETHER_SESSION not in read_marks(home)  # no mark before the window is recorded
    out = tether(home, "memory", "recall", "ledger database", "--json")
    assert out.returncode == 0, out.stderr
    assert "PostgreSQL 16" in json.loads(out.stdout)[0]["text"]
    said = held(home)
    assert len(said) == len(set(said)) == 6  # once, whichever side of the append it died
    assert TETHER_SESSION in read_marks(home)


def test_the_mark_of_a_session_no_longer_banked_is_dropped(banked: Path) -> None:
    home = banked
    catch_up(home, allow=frozenset())
    (corpus_dir(home) / f"{SIDS[1]}.ledger.json").unlink()
    _bank(home, SIDS[0], 11, "another window, so the marks are written again")
    catch_up(home, allow=frozenset())
    assert set(read_marks(home)) == {SIDS[0], SIDS[2], SIDS[3]}
