"""The Claude Code hooks as Claude Code runs them: a child process, the payload on stdin,
the real transcript format with compaction boundaries. They always exit 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from checkpoint_helpers import (
    SECRET,
    TETHER_SESSION,
    Transcript,
    heartbeat,
    hook,
    ledger_doc,
    payload,
    segments,
)
from daemon_helpers import child_env, tether, tether_argv

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "claude-code"


def two_windows(path: Path) -> Transcript:
    t = Transcript(path)
    t.user("We settled on PostgreSQL 16 for the ledger service.")
    t.assistant("Noted: PostgreSQL 16, the ledger service.")
    t.boundary()
    t.user(f"Deploy goes to Frankfurt. My key is {SECRET} <private>my diary entry</private>")
    t.tool_result()
    t.assistant("Frankfurt, eu-central-1, it is.")
    return t


@pytest.mark.parametrize("instructions", ["", None, "missing"])
@pytest.mark.parametrize("trigger", ["manual", "auto"])
def test_pre_compact_banks_the_window_since_the_last_boundary(
    home: Path, tmp_path: Path, trigger: str, instructions: str | None
) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    extra: dict[str, object] = (
        {} if instructions == "missing" else {"custom_instructions": instructions}
    )
    stdin = json.dumps({**json.loads(payload("PreCompact", t.path, trigger=trigger)), **extra})
    run = hook(home, "pre-compact", stdin)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # never a decision
    [seg] = segments(home)
    text = seg.read_text()
    assert "Frankfurt" in text
    assert "eu-central-1" in text
    assert "PostgreSQL" not in text  # before the boundary: the previous window
    assert "SUMMARY-OF-THE-HARNESS" not in text  # the harness's summary is no window
    assert "my diary entry" not in text
    assert "[private]" in text
    assert SECRET not in text
    assert "[REDACTED:anthropic-key]" in text
    [entry] = ledger_doc(home)["boundaries"]
    assert entry["source"] == f"pre-compact:{trigger}"
    assert entry["segment"] == seg.name
    [line] = heartbeat(home)
    assert line["event"] == "pre-compact"
    assert line["segment"] == "segment_banked"
    assert line["trigger"] == trigger
    assert "flush" not in line  # no daemon answered: no flush code, still banked


def test_the_same_window_twice_is_one_segment(home: Path, tmp_path: Path) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    for _ in range(2):
        assert hook(home, "pre-compact", payload("PreCompact", t.path)).returncode == 0
    assert len(segments(home)) == 1
    assert [x["segment"] for x in heartbeat(home)] == ["segment_banked", "segment_dup"]
    assert len(ledger_doc(home)["boundaries"]) == 1


def test_no_secret_and_no_word_of_the_transcript_in_telemetry(home: Path, tmp_path: Path) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    hook(home, "pre-compact", payload("PreCompact", t.path))
    hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    hook(home, "session-end", payload("SessionEnd", t.path, reason="other"), "--wait")
    tele = (home / "telemetry" / "heartbeat.jsonl").read_text()
    for word in ("Frankfurt", "PostgreSQL", "ledger service", "diary", SECRET[:20]):
        assert word not in tele
    for path in (home / "corpus").iterdir():
        if path.is_file():
            assert SECRET not in path.read_text(), path


def test_a_window_over_two_mib_is_banked_whole_in_ordered_parts_inside_the_deadline(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "big.jsonl")
    t.user("OLDEST-WORDS before everything")
    t.boundary()
    t.user("FIRST-WORDS of the window")
    filler = "tool output line with words and numbers 0123456789 " * 40
    while t.path.stat().st_size < 3 * 1024 * 1024:
        t.user(f"step {t.n}: {filler}")
        t.assistant(f"reply {t.n}")
    t.user("NEWEST-WORDS at the end")
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert run.returncode == 0
    [line] = heartbeat(home)
    assert line["segment"] == "segment_banked"
    assert line["parts"] == 2
    assert "rest" not in line  # nothing left for later
    entries = ledger_doc(home)["boundaries"]
    assert [(e["part"], e["parts"]) for e in entries] == [(1, 2), (2, 2)]
    assert len({e["window"] for e in entries}) == 1
    first, second = ((home / "corpus" / e["segment"]).read_text() for e in entries)
    assert "FIRST-WORDS" in first
    assert "NEWEST-WORDS" in second
    assert "OLDEST-WORDS" not in first + second
    steps = [n for text in (first, second) for n in re.findall(r"USER: step (\d+):", text)]
    assert steps == sorted(set(steps), key=int)  # every turn once, in order
    assert (int(steps[-1]) - int(steps[0])) // 2 + 1 == len(steps)  # a user turn every 2
    for e in entries:
        assert (home / "corpus" / e["segment"]).stat().st_size < 2.2 * 1024 * 1024


def test_a_deadline_too_tight_to_scan_writes_nothing_unscanned(home: Path, tmp_path: Path) -> None:
    (home / "tether.toml").write_text("[checkpoint]\ndeadline_s = 0.001\n")
    t = two_windows(tmp_path / "t.jsonl")
    assert hook(home, "pre-compact", payload("PreCompact", t.path)).returncode == 0
    assert segments(home) == []
    assert heartbeat(home)[0]["segment"] == "deadline_scan"
    # session end still covers the text: the ledger lacks the window, so all of it goes in
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "full_fallback"
    [seg] = segments(home)
    assert "Frankfurt" in seg.read_text()
    assert "PostgreSQL" in seg.read_text()


def test_a_missed_pre_compact_is_caught_by_the_session_end_full_fallback(
    home: Path, tmp_path: Path
) -> None:
    t = two_windows(tmp_path / "t.jsonl")  # Claude Code compacted without PreCompact
    t.user("after the compaction: Redis for the cache")
    run = hook(home, "session-end", payload("SessionEnd", t.path, reason="logout"), "--wait")
    assert run.returncode == 0
    assert heartbeat(home)[-1]["mode"] == "full_fallback"
    [seg] = segments(home)
    text = seg.read_text()
    assert "PostgreSQL" in text
    assert "Frankfurt" in text
    assert "Redis" in text
    assert "SUMMARY-OF-THE-HARNESS" not in text
    assert ledger_doc(home)["boundaries"][0]["source"] == "full"


def test_session_end_banks_only_the_remainder_when_every_boundary_is_covered(
    home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.user("first window: Kafka for events")
    hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    t.boundary()
    t.user("second window: Redis for the cache")
    hook(home, "pre-compact", payload("PreCompact", t.path, trigger="manual"))
    t.boundary()
    t.user("the remainder: Grafana for dashboards")
    hook(home, "session-end", payload("SessionEnd", t.path, reason="clear"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "remainder"
    texts = [p.read_text() for p in segments(home)]
    assert len(texts) == 3
    assert sum("Grafana" in x for x in texts) == 1
    assert not any("Grafana" in x and "Kafka" in x for x in texts)
    # once more: nothing is left
    hook(home, "session-end", payload("SessionEnd", t.path, reason="clear"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "skip_covered"
    assert len(segments(home)) == 3


def test_session_end_hands_its_work_to_a_detached_child(home: Path, tmp_path: Path) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    run = hook(home, "session-end", payload("SessionEnd", t.path, reason="other"))
    assert run.returncode == 0
    assert run.stdout == ""
    deadline = time.monotonic() + 30
    while not heartbeat(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heartbeat(home)[-1]["mode"] == "full_fallback"


def test_the_backstop_after_a_compaction_banks_what_pre_compact_missed(
    home: Path, tmp_path: Path
) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    t.boundary()  # the second compaction, PreCompact never fired for either
    run = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert run.returncode == 0
    out = json.loads(run.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "decision" not in json.loads(run.stdout)
    context = out["additionalContext"]
    assert "## Compaction checkpoints" in context
    assert len(segments(home)) == 2
    for seg in segments(home):
        assert f"tether://corpus/{seg.name.removesuffix('.txt')}" in context
    line = heartbeat(home)[-1]
    assert line["backstop"] == "backstop_banked"
    assert line["links"] == 2
    # again: covered, nothing new
    hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert heartbeat(home)[-1]["backstop"] == "backstop_covered"
    assert len(segments(home)) == 2
    # a session end after it: every boundary covered, the empty remainder needs nothing
    hook(home, "session-end", payload("SessionEnd", t.path, reason="other"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "skip_covered"


def test_the_pack_stays_within_pack_tokens(home: Path, tmp_path: Path) -> None:
    from tether.core.context.tokens import count

    (home / "tether.toml").write_text("[checkpoint]\npack_tokens = 120\n")
    (home / "memory" / "memory.md").write_text(
        "".join(f"- the owner fact number {i} is worth remembering\n" for i in range(80))
    )
    t = two_windows(tmp_path / "t.jsonl")
    t.boundary()
    run = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    context = json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"]
    assert 0 < count(context) <= 120
    assert "more lines not shown" in context
    assert "tether://corpus/" in context  # links come first
    plain = tether(home, "context-pack", "--session", TETHER_SESSION.removeprefix("cc-"))
    assert plain.returncode == 0
    assert plain.stdout == context


@pytest.mark.parametrize("stdin", ["", "not json", "[]", '{"hook_event_name": "PreCompact"}'])
def test_a_payload_it_cannot_use_exits_0_with_a_typed_line(home: Path, stdin: str) -> None:
    run = hook(home, "pre-compact", stdin)
    assert run.returncode == 0
    assert heartbeat(home)[-1]["segment"] in {"bad_payload", "no_session"}


@pytest.mark.parametrize("event", ["pre-compact", "session-start"])
def test_an_endless_stdin_is_refused_at_once_and_exits_0(home: Path, event: str) -> None:
    # /dev/zero never ends: the hook reads past the payload's bound once, names it, and
    # still does what it can (session start prints a pack), instead of eating memory.
    with open("/dev/zero", "rb") as endless:
        run = subprocess.run(
            [*tether_argv(home, "hook", "claude-code", event)],
            stdin=endless,
            capture_output=True,
            env=child_env(None),
            timeout=60,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    assert heartbeat(home)[-1]["segment"] == "payload_too_large"
    if event == "session-start":
        assert json.loads(run.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def test_a_missing_transcript_and_a_missing_home_exit_0(tmp_path: Path) -> None:
    home = tmp_path / "nohome"
    run = hook(home, "pre-compact", payload("PreCompact", tmp_path / "gone.jsonl"))
    assert run.returncode == 0
    assert heartbeat(home)[-1]["segment"] == "no_transcript"
    start = hook(home, "session-start", payload("SessionStart", None, source="startup"))
    assert start.returncode == 0
    assert json.loads(start.stdout)["hookSpecificOutput"]


def test_a_hard_error_exits_0_and_is_what_doctor_counts(home: Path, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from tether.checkpoint.telemetry import hard_error_rate

    t = two_windows(tmp_path / "t.jsonl")
    (home / "corpus" / f"{TETHER_SESSION}.ledger.json").write_text("{broken")
    run = hook(home, "pre-compact", payload("PreCompact", t.path))
    assert run.returncode == 0
    assert heartbeat(home)[-1]["error"] == "CorruptLedgerError"
    (home / "corpus" / f"{TETHER_SESSION}.ledger.json").unlink()
    hook(home, "pre-compact", payload("PreCompact", t.path))  # a typed success
    (home / "tether.toml").write_text("[checkpoint]\ndeadline_s = 0.001\n")
    hook(home, "pre-compact", payload("PreCompact", t.path))  # a typed degrade: no error
    rate = hard_error_rate(home, datetime.now(UTC), timedelta(days=1))
    assert (rate.runs, rate.errors, rate.names) == (3, 1, ("CorruptLedgerError",))


def test_a_kill_after_the_segment_write_loses_no_byte(home: Path, tmp_path: Path) -> None:
    t = two_windows(tmp_path / "t.jsonl")
    env = {"TETHER_CRASH_AT": "hook-after-segment-write"}
    run = hook(home, "pre-compact", payload("PreCompact", t.path), env=env)
    assert run.returncode == -9
    [seg] = segments(home)
    assert "Frankfurt" in seg.read_text()
    assert not (home / "corpus" / f"{TETHER_SESSION}.ledger.json").exists()
    # the retry (or the backstop) records the boundary of the segment already there
    hook(home, "pre-compact", payload("PreCompact", t.path))
    assert heartbeat(home)[-1]["segment"] == "segment_dup"
    assert len(ledger_doc(home)["boundaries"]) == 1


def test_auto_writeback_false_banks_the_window_retired(home: Path, tmp_path: Path) -> None:
    (home / "tether.toml").write_text("[checkpoint]\nauto_writeback = false\n")
    t = two_windows(tmp_path / "t.jsonl")
    hook(home, "pre-compact", payload("PreCompact", t.path))
    [entry] = ledger_doc(home)["boundaries"]
    assert entry["retired"] is True
    assert len(segments(home)) == 1


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_every_real_transcript_fixture_goes_through_every_hook(home: Path, fixture: str) -> None:
    path = FIXTURES / fixture
    for event, extra in (
        ("pre-compact", {"trigger": "auto"}),
        ("session-start", {"source": "compact"}),
        ("session-end", {"reason": "other"}),
    ):
        args = ("--wait",) if event == "session-end" else ()
        run = hook(home, event, payload(event, path, **extra), *args)
        assert run.returncode == 0
        assert "error" not in heartbeat(home)[-1], heartbeat(home)[-1]
    codes = [x.get("segment") for x in heartbeat(home)]
    assert codes[0] in {"segment_banked", "empty_window"}


def test_codex_session_end_captures_a_rollout(home: Path) -> None:
    rollout = FIXTURES / "codex" / "ryoppippi__ccusage__codex_session-alpha.jsonl"
    run = tether(
        home,
        "hook",
        "codex",
        "session-end",
        "--wait",
        input=payload("SessionEnd", rollout, session="session-alpha"),
    )
    assert run.returncode == 0
    line = heartbeat(home)[-1]
    assert line["harness"] == "codex"
    assert line["mode"] in {"full_fallback", "skip_covered"}
    assert "error" not in line


def test_hooks_run_with_the_environment_claude_code_gives(home: Path, tmp_path: Path) -> None:
    """Claude Code runs the installed command line through a shell with TETHER_HOME unset:
    the --home the installer wrote is what finds the home."""
    project = tmp_path / "proj"
    project.mkdir()
    installed = tether(
        home, "hook", "install", "--harness", "claude-code", "--project", str(project)
    )
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["PreCompact"][0]["hooks"][0]["command"]
    assert f"--home {home}" in command
    t = two_windows(tmp_path / "t.jsonl")
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    argv = command.split(" ")
    if not Path(argv[0]).exists():  # the test interpreter's tether, as the installer saw it
        import sys

        argv = [sys.executable, "-m", "tether.cli.main", *argv[1:]]
    run = subprocess.run(argv, input=payload("PreCompact", t.path), text=True, env=env, check=False)
    assert run.returncode == 0
    assert len(segments(home)) == 1


def test_the_hook_benchmark_banks_what_it_times(tmp_path: Path) -> None:
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "hook_wall_time.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--runs", "1", "--mib", "0.2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    figures = [json.loads(line) for line in run.stdout.splitlines()]
    assert [f["figure"] for f in figures] == ["python_c_pass_ms", "pre_compact_hook_ms"]
    assert figures[1]["segment_bytes"] > 100_000
