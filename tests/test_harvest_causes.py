"""A failed or empty extraction is never a success: ``tether transcripts ingest --facts``
against the fake llama-server over real HTTP says the cause (malformed reply with an
excerpt, timeout, no model at all), keeps no receipt that would block a retry, learns the
owner's own statements by the extractive path meanwhile, and ``tether usage`` counts the
calls, ok and failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from checkpoint_helpers import TETHER_SESSION, Transcript, segments
from daemon_helpers import tether
from tether.checkpoint.manifest import read_manifests, read_receipt
from tether.config import load_config
from tether.stores import open_sweep_store
from tether.testing.fake_llama import FakeLlama, Reply

GOOD_PAGE = Reply(
    content=json.dumps(
        {
            "memories": [
                {
                    "text": "The ledger service runs on PostgreSQL 16",
                    "subject": "project",
                    "entity": "ledger-db",
                    "sessions": [TETHER_SESSION],
                    "first_turn": 1,
                    "last_turn": 1,
                    "quote": "PostgreSQL 16 for the ledger service",
                }
            ]
        }
    )
)


def configure(home: Path, fake: FakeLlama, extra: str = "", timeout_s: float = 5) -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = {timeout_s}\n{extra}'
    )


def transcript(path: Path, *lines: str) -> Path:
    t = Transcript(path)
    for line in lines or ("I'm allergic to peanuts. We settled on PostgreSQL 16 for the ledger.",):
        t.user(line)
        t.assistant("Noted.")
    return t.path


def ingest(home: Path, path: Path, *extra: str) -> tuple[int, Any, str]:
    run = tether(home, "transcripts", "ingest", str(path), "--facts", *extra)
    if "--json" in extra:
        [row] = json.loads(run.stdout)
        return run.returncode, row, run.stderr
    return run.returncode, run.stdout, run.stderr


def facts(home: Path) -> dict[str, Any]:
    sweep = open_sweep_store(home, load_config(home))
    try:
        with sweep.transaction(write=False) as tx:
            return {f.entity: f for f in tx.facts("owner")}
    finally:
        sweep.close()


def usage(home: Path) -> dict[str, Any]:
    run = tether(home, "usage", "--json")
    assert run.returncode == 0, run.stderr
    rows: dict[str, dict[str, Any]] = {r["key"]: r for r in json.loads(run.stdout)["rows"]}
    return rows["harvest"]


def test_a_malformed_reply_is_named_no_receipt_is_kept_and_a_retry_succeeds(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    configure(home, fake)
    path = transcript(tmp_path / "t.jsonl")
    fake.script(Reply(content="Sure! Here are your memories: the ledger runs on PostgreSQL."))
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err  # the extractive path learned something: not a failure
    assert (row["outcome"], row["cause"], row["path"]) == (
        "fallback",
        "model_output_malformed",
        "extractive",
    )
    assert "Here are your memories" in row["detail"]  # the excerpt, trimmed
    assert (row["model_failed"], row["model_calls"], row["extractive"]) == (1, 0, 2)
    [segment] = segments(home)
    assert read_receipt(home, segment.name) is None  # nothing blocks the retry
    learned = facts(home)
    assert learned["allergy-peanuts"].text == "The owner is allergic to peanuts."
    assert learned["allergy-peanuts"].authority == "agent_reusable_conclusion"  # the cap
    assert usage(home)["failed"] == 1
    # the retry asks the model again, and only for the chunk that failed
    fake.script(GOOD_PAGE)
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err
    assert (row["outcome"], row["path"], row["cause"]) == ("inserted", "model+extractive", None)
    receipt = read_receipt(home, segment.name)
    assert receipt is not None
    assert (receipt.path, receipt.model_calls) == ("model+extractive", 1)
    assert "ledger-db" in facts(home)
    assert len(fake.requests) == 2
    harvest = usage(home)
    assert (harvest["calls"], harvest["failed"]) == (2, 1)  # a malformed reply is a call
    assert harvest["prompt_n"] > 0
    # and now the receipt holds: no third call
    code, row, _ = ingest(home, path, "--json")
    assert row["outcome"] == "already_ingested"
    assert len(fake.requests) == 2


def test_a_timeout_is_named_and_with_nothing_learned_the_command_fails(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    configure(home, fake, timeout_s=0.5)
    path = transcript(tmp_path / "t.jsonl", "Can you look at the build?")
    fake.script(Reply(content='{"memories": []}', delay_s=3))
    code, out, _ = ingest(home, path)
    assert code == 1
    assert "facts: failed (0 new, 0 already known, none learned)" in out
    assert "model_timeout" in out
    assert "no receipt kept, so the next run retries" in out
    assert read_receipt(home, segments(home)[0].name) is None
    assert usage(home)["failed"] == 1


def test_an_empty_page_is_said_plainly_and_only_the_owners_lane_may_retry_it(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    configure(home, fake)
    path = transcript(tmp_path / "t.jsonl", "Can you look at the build?")
    fake.script(Reply(content='{"memories": []}'))
    code, out, _ = ingest(home, path)
    assert code == 0
    assert "facts: empty (0 new, 0 already known, by model)" in out
    assert "no fact found" in out
    receipt = read_receipt(home, segments(home)[0].name)
    assert receipt is not None
    assert (receipt.outcome, receipt.facts) == ("empty", ())
    fake.script(Reply(content='{"memories": []}'))
    ingest(home, path)
    assert len(fake.requests) == 2  # the explicit lane asked again


def test_the_extractive_mode_calls_no_model_and_a_later_model_run_is_allowed(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    configure(home, fake, '[extract]\nmode = "extractive"\n')
    path = transcript(tmp_path / "t.jsonl")
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err
    assert (row["outcome"], row["path"], row["model_calls"]) == ("inserted", "extractive", 0)
    assert fake.requests == []
    receipt = read_receipt(home, segments(home)[0].name)
    assert receipt is not None
    assert receipt.path == "extractive"
    configure(home, fake)
    fake.script(GOOD_PAGE)
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err
    assert (row["outcome"], row["path"]) == ("inserted", "model")
    assert len(fake.requests) == 1
    assert "ledger-db" in facts(home)
    [published] = read_manifests(home, TETHER_SESSION)  # the newer receipt replaced it
    assert published.path == "model"
    assert "The ledger service runs on PostgreSQL 16" in published.facts


def test_an_embedded_backend_without_its_model_says_so_and_learns_by_the_extractive_path(
    home: Path, tmp_path: Path
) -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nbackend = "embedded"\nmodel_path = "{tmp_path / "missing.gguf"}"\n'
    )
    path = transcript(tmp_path / "t.jsonl")
    code, out, err = ingest(home, path)
    assert code == 0, err
    assert "by extractive; no model: model_absent" in out
    assert "missing.gguf" in out
    assert "allergy-peanuts" in facts(home)


@pytest.mark.anyio
async def test_a_budget_refusal_is_named_sends_nothing_and_is_no_failed_call(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    from tether.checkpoint.bank import bank_redacted, redact_text
    from tether.daemon.compose import build_runtime, harvest_queue
    from tether.testing.clock import StepClock

    configure(home, fake, "[budget.harvest]\ncall_tokens = 10\n")
    text = "[2026-11-01T10:00:00Z] USER: I live in Lisbon and I work at Acme Robotics.\n"
    report = bank_redacted(
        home,
        TETHER_SESSION,
        redact_text(text),
        what="test",
        time=datetime(2026, 11, 1, 10, tzinfo=UTC),
        source="test",
    )
    assert report.path is not None
    runtime = build_runtime(home, load_config(home), clock=StepClock())
    try:
        with harvest_queue(runtime) as queue:
            out = await queue.run_one(report.path.name, "harvest")
    finally:
        await runtime.aclose()
    assert (out.outcome, out.cause, out.path) == ("fallback", "budget_call", "extractive")
    assert out.detail is not None
    assert "refused by [budget]" in out.detail
    assert fake.requests == []  # nothing was sent
    assert read_receipt(home, report.path.name) is None  # retried once the budget allows
    learned = facts(home)
    assert learned["home"].text == "The owner lives in Lisbon."
    assert learned["employer"].text == "The owner works at Acme Robotics."
    harvest = usage(home)
    assert (harvest["refused"], harvest["failed"], harvest["calls"]) == (1, 0, 0)


def test_ingest_facts_is_gated_by_the_harvest_budget_like_the_daemons_harvest(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    """``tether transcripts ingest --facts`` makes the harvest's calls in the owner's
    process: ``[budget.harvest]`` weighs them as it weighs the daemon's."""
    configure(home, fake, "[budget.harvest]\ncall_tokens = 10\n")
    path = transcript(tmp_path / "t.jsonl")
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err  # the extractive path learned the owner's statements
    assert (row["outcome"], row["cause"], row["path"]) == ("fallback", "budget_call", "extractive")
    assert fake.requests == []  # nothing was sent
    assert read_receipt(home, segments(home)[0].name) is None  # retried once it may
    assert "allergy-peanuts" in facts(home)
    harvest = usage(home)
    assert (harvest["refused"], harvest["failed"], harvest["calls"]) == (1, 0, 0)
    configure(home, fake, "[budget.harvest]\nday_tokens = 100000\n")
    fake.script(GOOD_PAGE)
    code, row, err = ingest(home, path, "--json")
    assert code == 0, err
    assert row["path"] == "model+extractive"
    assert len(fake.requests) == 1
    harvest = usage(home)  # the call, from the ledger the gate settled before exiting
    assert (harvest["refused"], harvest["calls"]) == (1, 1)
    assert harvest["prompt_n"] > 0
