"""The harvest: facts from banked segments through the shared extractor, by three lanes
(the daemon's FIFO after a hook, the maintenance pass, ``transcripts ingest --facts``),
against the fake llama-server over real HTTP and a real ``tether serve`` child."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from checkpoint_helpers import (
    SECRET,
    TETHER_SESSION,
    Transcript,
    heartbeat,
    hook,
    payload,
    segments,
)
from daemon_helpers import Daemon, daemon_home, tether
from tether.checkpoint.manifest import manifest_path, read_receipt
from tether.config import load_config
from tether.daemon.compose import harvest_now
from tether.stores import open_sweep_store
from tether.testing.fake_llama import FakeLlama, Reply


def page(*memories: dict[str, Any]) -> Reply:
    return Reply(content=json.dumps({"memories": list(memories)}))


def memory(text: str, entity: str, quote: str | None = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "text": text,
        "subject": "project",
        "entity": entity,
        "sessions": [TETHER_SESSION],
        "first_turn": 1,
        "last_turn": 2,
        **extra,
    }
    if quote:
        m["quote"] = quote
    return m


FRANKFURT = memory(
    "Deploys go to Frankfurt (eu-central-1)", "deploy-region", "Frankfurt, eu-central-1"
)


def transcript(path: Path) -> Transcript:
    t = Transcript(path)
    t.user("We settled on PostgreSQL 16 for the ledger service.")
    t.boundary()
    t.user(f"Deploy goes to Frankfurt. Key {SECRET}")
    t.assistant("Frankfurt, eu-central-1, it is.")
    return t


def facts(home: Path) -> list[Any]:
    sweep = open_sweep_store(home, load_config(home))
    try:
        with sweep.transaction(write=False) as tx:
            return tx.facts("owner")
    finally:
        sweep.close()


def wait_for(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def harvest_lines(home: Path) -> list[dict[str, Any]]:
    return [x for x in heartbeat(home) if x["event"] == "harvest"]


def test_hook_to_daemon_to_fact_to_pack_and_the_second_lane_adds_nothing(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        t = transcript(tmp_path / "t.jsonl")
        daemon = Daemon(home)
        try:
            fake.script(page(FRANKFURT))
            run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
            assert run.returncode == 0
            assert heartbeat(home)[0]["flush"] == "scheduled"
            wait_for(lambda: harvest_lines(home))
            [line] = harvest_lines(home)
            assert line["outcome"] == "inserted", line
            assert (line["inserted"], line["duplicate"], line["links"]) == (1, 0, 1)
            # the same segment again: the daemon says so, no second extraction
            hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
            wait_for(lambda: len(harvest_lines(home)) == 2)
            assert harvest_lines(home)[1]["outcome"] == "already_ingested"
        finally:
            code, err = daemon.stop()
        assert code == 0, err
        [fact] = facts(home)
        assert fact.text == "Deploys go to Frankfurt (eu-central-1)"
        assert fact.authority == "agent_reusable_conclusion"  # capped, a quote of the agent
        [ref] = json.loads(fact.refs)
        assert ref["session"] == TETHER_SESSION
        assert ref["lane"] == "harvest"
        assert ref["segment"] == segments(home)[0].name.removesuffix(".txt")
        assert (ref["first_turn"], ref["last_turn"]) == (1, 2)
        # recall finds the fact
        found = tether(home, "memory", "recall", "Frankfurt", "--json")
        assert "Deploys go to Frankfurt" in found.stdout
        # the next start's pack has the fact and the segment's link
        start = hook(home, "session-start", payload("SessionStart", t.path, source="resume"))
        context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "Deploys go to Frankfurt" in context
        assert f"tether://corpus/{segments(home)[0].name.removesuffix('.txt')}" in context
        # the third lane over the whole transcript: the overlap is absorbed, one fact
        fake.script(page(FRANKFURT, memory("The ledger uses PostgreSQL 16", "ledger-db")))
        ingest = tether(home, "transcripts", "ingest", str(t.path), "--facts", "--json")
        assert ingest.returncode == 0, ingest.stderr
        [row] = json.loads(ingest.stdout)
        assert (row["outcome"], row["inserted"], row["duplicate"]) == ("inserted", 1, 1)
        assert sorted(f.entity for f in facts(home)) == ["deploy-region", "ledger-db"]
        for path in (home / "corpus").rglob("*"):
            if path.is_file():
                assert SECRET not in path.read_text(), path
        assert SECRET not in (home / "telemetry" / "heartbeat.jsonl").read_text()


def test_a_hook_killed_after_its_write_is_extracted_by_the_maintenance_pass(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        t = transcript(tmp_path / "t.jsonl")
        run = hook(
            home,
            "pre-compact",
            payload("PreCompact", t.path),
            env={"TETHER_CRASH_AT": "hook-after-segment-write"},
        )
        assert run.returncode == -9
        [seg] = segments(home)
        assert not (home / "corpus" / f"{TETHER_SESSION}.ledger.json").exists()
        # the ledger is gone with the kill: the next hook (here: session end) records it
        hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
        fake.script(page(FRANKFURT))
        daemon = Daemon(home)
        try:
            wait_for(lambda: read_receipt(home, seg.name) is not None)
        finally:
            daemon.stop()
        receipt = read_receipt(home, seg.name)
        assert receipt is not None
        assert receipt.lane == "maintenance"
        assert receipt.inserted == 1
        # the other window (the session start banked it) got no page from the fake, so
        # its reply is not JSON: the extractive path learns the owner's own statement,
        # and no receipt is kept for it, so a later pass asks the model again
        fell_back = [x for x in harvest_lines(home) if x["outcome"] == "fallback"]
        assert [(x["cause"], x["path"]) for x in fell_back] == [
            ("model_output_malformed", "extractive")
        ]
        assert read_receipt(home, fell_back[0]["segment"]) is None
        by_entity = {f.entity: f for f in facts(home)}
        assert sorted(by_entity) == ["deploy-region", "settled-postgresql-16"]
        assert by_entity["settled-postgresql-16"].text == (
            "The owner and others settled on PostgreSQL 16 for the ledger service."
        )


def write_config(home: Path, fake: FakeLlama, extra: str = "") -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n{extra}')


def banked(home: Path, tmp_path: Path) -> str:
    t = transcript(tmp_path / "t.jsonl")
    assert hook(home, "pre-compact", payload("PreCompact", t.path)).returncode == 0
    return segments(home)[0].name


def test_writeback_off_retires_and_turned_back_on_it_stays_retired(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    write_config(home, fake)
    name = banked(home, tmp_path)
    write_config(home, fake, "[checkpoint]\nauto_writeback = false\n")
    config = load_config(home)
    out = asyncio.run(harvest_now(home, config, name, lane="maintenance"))
    assert out.outcome == "extraction_disabled"
    write_config(home, fake, "[checkpoint]\nauto_writeback = true\n")
    again = asyncio.run(harvest_now(home, load_config(home), name, lane="harvest"))
    assert again.outcome == "extraction_disabled"
    assert fake.requests == []
    assert facts(home) == []
    # the owner's explicit lane is never gated
    fake.script(page(FRANKFURT))
    forced = asyncio.run(harvest_now(home, load_config(home), name, lane="ingest"))
    assert (forced.outcome, forced.inserted) == ("inserted", 1)


def test_an_unreadable_config_holds_the_segment_untouched(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    write_config(home, fake)
    name = banked(home, tmp_path)
    config = load_config(home)
    (home / "tether.toml").write_text("[checkpoint]\nauto_writeback = 'maybe'\n")
    out = asyncio.run(harvest_now(home, config, name, lane="maintenance"))
    assert out.outcome == "extraction_disabled"
    ledger = json.loads((home / "corpus" / f"{TETHER_SESSION}.ledger.json").read_text())
    assert ledger["boundaries"][0]["retired"] is False  # held, not retired
    write_config(home, fake)
    fake.script(page(FRANKFURT))
    assert asyncio.run(harvest_now(home, config, name, lane="maintenance")).inserted == 1


def test_a_link_that_resolves_to_nothing_is_never_banked(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    write_config(home, fake)
    tether(home, "page", "write", "ops/runbook", input="How we deploy.")
    name = banked(home, tmp_path)
    fake.script(
        page(
            memory("See tether://ops/runbook for deploys", "deploy-doc"),
            memory("And tether://people/nobody knows", "ghost"),
        )
    )
    out = asyncio.run(harvest_now(home, load_config(home), name, lane="harvest"))
    receipt = read_receipt(home, name)
    assert receipt is not None
    assert "tether://ops/runbook" in receipt.links
    assert "tether://people/nobody" not in receipt.links
    assert out.links == 2  # the page and the segment itself


def test_a_failed_manifest_publish_keeps_the_receipt_and_is_retried_without_the_model(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    write_config(home, fake)
    name = banked(home, tmp_path)
    manifest_path(home, TETHER_SESSION).mkdir()  # a publish cannot rename over it
    fake.script(page(FRANKFURT))
    out = asyncio.run(harvest_now(home, load_config(home), name, lane="harvest"))
    assert out.outcome == "manifest_failed"
    assert read_receipt(home, name) is not None
    manifest_path(home, TETHER_SESSION).rmdir()
    calls = len(fake.requests)
    again = asyncio.run(harvest_now(home, load_config(home), name, lane="maintenance"))
    assert again.outcome == "already_ingested"
    assert len(fake.requests) == calls  # no second extraction
    doc = json.loads(manifest_path(home, TETHER_SESSION).read_text())
    assert [r["segment"] for r in doc["published"]] == [name]


def test_the_whole_segment_is_read_in_chunks_not_only_its_start(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    write_config(home, fake)
    t = Transcript(tmp_path / "long.jsonl")
    for i in range(60):
        t.user(f"note {i}: " + "padding words " * 60)
    t.user("LAST-DECISION: ship on Thursdays")
    hook(home, "pre-compact", payload("PreCompact", t.path))
    [seg] = segments(home)
    for _ in range(10):
        fake.script(page())
    out = asyncio.run(harvest_now(home, load_config(home), seg.name, lane="harvest"))
    assert out.chunks > 1
    assert len(fake.requests) == out.chunks
    last = fake.requests[-1].messages[1]["content"]
    assert "LAST-DECISION" in last


@pytest.mark.anyio
async def test_the_queue_answers_with_typed_codes(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    from tether.checkpoint.harvest import Harvester
    from tether.daemon.harvest import CAP, HarvestQueue
    from tether.extract.extractor import Extractor
    from tether.llm.llama_server import LlamaServerClient
    from tether.testing.clock import StepClock

    write_config(home, fake)
    name = banked(home, tmp_path)
    llm = LlamaServerClient(fake.url, timeout_s=5)
    sweep = open_sweep_store(home, load_config(home))
    clock = StepClock()
    harvester = Harvester(
        home,
        Extractor(llm, slot=1),
        sweep,
        page_exists=lambda _: False,
        writeback=lambda: None,
        now=clock.now,
    )
    queue = HarvestQueue(home, harvester, clock, abort_s=0.3)
    try:
        assert queue.schedule(TETHER_SESSION, "../../etc/passwd") == "skip_bad_basename"
        assert queue.schedule("cc-other", name) == "skip_no_session"
        missing = f"{TETHER_SESSION}.seg-{'0' * 24}.txt"
        assert queue.schedule(TETHER_SESSION, missing) == "skip_not_found"
        assert queue.schedule(TETHER_SESSION, name) == "scheduled"
        assert queue.schedule(TETHER_SESSION, name) == "skip_already_queued"
        queue.items.extend(("x", "harvest") for _ in range(CAP))
        assert queue.schedule(TETHER_SESSION, name) == "skip_already_queued"
        queue.queued.clear()
        assert queue.schedule(TETHER_SESSION, name) == "skip_queue_full"
        queue.items.clear()
        # a model slower than the abort: aborted, nothing written, retryable
        fake.script(Reply(content='{"memories": []}', delay_s=2.0))
        out = await queue.run_one(name, "harvest")
        assert out.outcome == "aborted"
        assert read_receipt(home, name) is None
        assert harvest_lines(home)[-1]["outcome"] == "aborted"
        queue.closing = True
        assert queue.schedule(TETHER_SESSION, name) == "skip_shutting_down"
    finally:
        await llm.aclose()
        sweep.close()


@pytest.mark.anyio
async def test_budget_harvest_caps_the_daemons_extraction_calls(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    from tether.daemon.compose import build_runtime, harvest_queue
    from tether.testing.clock import StepClock

    write_config(home, fake, "[budget.harvest]\ncall_tokens = 10\n")
    name = banked(home, tmp_path)
    runtime = build_runtime(home, load_config(home), clock=StepClock())
    try:
        with harvest_queue(runtime) as queue:
            out = await queue.run_one(name, "harvest")
    finally:
        await runtime.aclose()
    assert out.error == "BudgetRefusedError"
    assert fake.requests == []  # nothing was sent
    assert read_receipt(home, name) is None  # the maintenance pass retries it
    assert harvest_lines(home)[-1]["error"] == "BudgetRefusedError"


def test_the_harvest_benchmark_runs_and_dedups() -> None:
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "harvest_throughput.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--segments", "2", "--kib", "8"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    figures = [json.loads(line) for line in run.stdout.splitlines()]
    assert [f["figure"] for f in figures] == ["extractor_calls_only", "harvest_throughput"]
    assert figures[1]["facts_inserted"] == 2  # the shared fact once, per-chunk facts once
