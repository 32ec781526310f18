"""The checkpoint lane under faults, as real processes: windows far over 2 MiB banked
whole (in ordered parts, inside the deadline or by the hook's detached child), a hook
killed between its segment write and its ledger entry (the next hook adopts the segment:
one segment and one ledger entry per window part, no lost text), and a harvest killed
holding its claim (the next one takes over at once: no 5-minute stall)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from checkpoint_helpers import Transcript, heartbeat, hook, ledger_doc, payload, segments


def corpus_text(home: Path) -> str:
    return "".join(p.read_text() for p in segments(home))


def assert_each_once(home: Path, facts: list[str]) -> None:
    text = corpus_text(home)
    counts = {f: len(re.findall(f"Remember {f}:", text)) for f in facts}
    assert [f for f, c in counts.items() if c == 0] == [], "lost"
    assert [f for f, c in counts.items() if c > 1] == [], "duplicated"


def assert_ledger_holds_every_segment(home: Path) -> None:
    held = sorted(e["segment"] for e in ledger_doc(home)["boundaries"])
    assert held == sorted(p.name for p in segments(home))


def wait_for_line(home: Path, check: object, timeout: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in heartbeat(home):
            if check(line):  # type: ignore[operator]
                return line
        time.sleep(0.05)
    raise AssertionError(f"no such telemetry line: {heartbeat(home)}")


def test_pre_compact_banks_every_fact_of_a_twelve_mb_window(home: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.user("an older window")
    t.boundary()
    facts = t.planted(40, 12, talk=120_000)  # ~5 MB of words to bank, 12 MB of file
    assert t.path.stat().st_size > 12 * 1024 * 1024
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert run.returncode == 0, run.stderr
    assert_each_once(home, facts)
    [line] = heartbeat(home)
    assert line["segment"] == "segment_banked", line
    assert line["parts"] == len(segments(home)) >= 3
    assert_ledger_holds_every_segment(home)
    entries = ledger_doc(home)["boundaries"]
    assert [e["part"] for e in entries] == list(range(1, len(entries) + 1))
    # the same window again (and the backstop once it is closed): nothing added
    hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert heartbeat(home)[-1]["segment"] == "segment_dup"
    t.boundary()
    hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert heartbeat(home)[-1]["backstop"] == "backstop_covered"
    assert len(ledger_doc(home)["boundaries"]) == len(entries)


def test_what_the_deadline_leaves_is_finished_by_a_detached_child(
    home: Path, tmp_path: Path
) -> None:
    (home / "tether.toml").write_text("[checkpoint]\ndeadline_s = 0.001\n")
    t = Transcript(tmp_path / "t.jsonl")
    facts = t.planted(12, 3, talk=400_000)  # ~4.8 MB of words: three parts
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="manual"))
    assert run.returncode == 0
    first = heartbeat(home)[0]
    assert first["rest"] == "detached", first
    assert first["rest_bytes"] > 4_000_000
    done = wait_for_line(home, lambda x: x.get("rest") == "finished")
    assert "error" not in done
    assert_each_once(home, facts)
    assert_ledger_holds_every_segment(home)
    assert {e["source"] for e in ledger_doc(home)["boundaries"]} == {"pre-compact:manual"}


def test_session_end_banks_every_fact_of_a_transcript_over_ten_mib(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    facts = t.planted(30, 7.5)
    t.boundary()  # compacted without PreCompact
    facts += t.planted(30, 7.5)
    assert t.path.stat().st_size > 11 * 1024 * 1024  # over session end's 10 MiB of before
    run = hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert run.returncode == 0
    assert heartbeat(home)[-1]["mode"] == "full_fallback"
    assert_each_once(home, facts)
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "skip_covered"


CRASH = {"TETHER_CRASH_AT": "hook-after-segment-write"}


def test_a_kill_between_segment_and_ledger_then_the_backstop_banks_each_part_once(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.user("an older window")
    t.boundary()
    facts = t.planted(20, 3, talk=120_000)  # ~2.4 MB of words: two parts
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"), env=CRASH)
    assert run.returncode == -9  # killed after its first segment, before its entry
    assert len(segments(home)) == 1
    t.boundary()  # the harness compacted anyway; the backstop runs after it
    start = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert start.returncode == 0
    assert heartbeat(home)[-1]["backstop"] == "backstop_banked"
    assert_each_once(home, facts)
    assert_ledger_holds_every_segment(home)
    entries = ledger_doc(home)["boundaries"]
    assert sorted((e["part"], e["parts"]) for e in entries) == [(1, 2), (2, 2)]
    # session end adds the older window no hook banked, and nothing of this one
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "full_fallback"
    assert len(ledger_doc(home)["boundaries"]) == 3
    assert "an older window" in corpus_text(home)
    assert_each_once(home, facts)


def test_a_window_that_grew_after_a_killed_hook_adds_only_its_new_turns(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    facts = t.planted(5, 0.1)
    run = hook(home, "pre-compact", payload("PreCompact", t.path), env=CRASH)
    assert run.returncode == -9
    facts += t.planted(5, 0.1)  # the compaction never happened; the window grew
    run = hook(home, "pre-compact", payload("PreCompact", t.path))
    assert run.returncode == 0
    assert_each_once(home, facts)
    assert_ledger_holds_every_segment(home)
    assert len(segments(home)) == 2
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "skip_covered"


def test_the_soak_hook_lane_runs_and_finds_nothing_lost_or_duplicated() -> None:
    import json
    import subprocess
    import sys

    soak = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"
    run = subprocess.run(
        [sys.executable, str(soak), "--hooks", "--windows", "8", "--seed", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    figures = json.loads(run.stdout)
    assert run.returncode == 0, figures
    assert figures["windows"] == 8
    assert figures["acknowledged"] + figures["deferred_to_next_hook"] > 0
    assert (figures["lost"], figures["duplicated"], figures["stuck"]) == (0, 0, 0)
    assert figures["hook_runs"]["session-end:exit_0"] == 4


def test_a_hook_that_finds_the_session_busy_leaves_the_window_to_its_child(
    home: Path, tmp_path: Path
) -> None:
    import fcntl
    import os

    from checkpoint_helpers import TETHER_SESSION

    (home / "tether.toml").write_text("[checkpoint]\ndeadline_s = 0.5\n")
    t = Transcript(tmp_path / "t.jsonl")
    facts = t.planted(6, 0.2)
    (home / "corpus").mkdir(exist_ok=True)
    fd = os.open(home / "corpus" / f"{TETHER_SESSION}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another hook of the session is banking
        run = hook(home, "pre-compact", payload("PreCompact", t.path))
        assert run.returncode == 0
        [line] = heartbeat(home)
        assert (line["segment"], line["rest"]) == ("deadline_lock", "detached")
        time.sleep(0.5)
        assert segments(home) == []  # the child waits for the lock
    finally:
        os.close(fd)
    wait_for_line(home, lambda x: x.get("rest") == "finished")
    assert_each_once(home, facts)
    assert_ledger_holds_every_segment(home)


def test_a_ledger_moved_aside_is_rebuilt_from_the_segments_not_banked_again(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    facts = t.planted(4, 0.1)
    hook(home, "pre-compact", payload("PreCompact", t.path))
    t.boundary()
    facts += t.planted(4, 0.1)
    before = sorted(p.name for p in segments(home))
    ledger = next((home / "corpus").glob("*.ledger.json"))
    ledger.rename(ledger.with_suffix(".corrupt"))
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "remainder"  # the first window: adopted
    assert_each_once(home, facts)
    assert_ledger_holds_every_segment(home)
    assert set(before) < {p.name for p in segments(home)}
