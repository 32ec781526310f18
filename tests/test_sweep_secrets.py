"""No secret in what the sweep keeps: staged packets, facts, journal and receipts hold the
redacted candidate, exactly once, on real SQLite (the crash lane is in test_sweep_crash)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sweep_helpers import DictProducer, day_packet, fact, snapshot, utc
from tether.config import SweepConfig
from tether.core.sweep.packet import DailySweepInput, TriggerRepair, digest, encode_packet
from tether.core.sweep.state import StagedPacket
from tether.core.sweep.windows import window_for
from tether.scan.secrets import fingerprint
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners
from tether.sweep.runner import Runner, members

D0 = date(2026, 10, 31)
NOON = utc("2026-11-01T12:00:00+00:00")  # D0 is complete in Paris
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSweepStore]:
    s = SqliteSweepStore(tmp_path / "tether.db")
    owners.add(s, "alice", "Europe/Paris", utc("2026-11-01T08:00:00+00:00"))
    yield s
    s.close()


def run(store: SqliteSweepStore, packet: DailySweepInput | None, at: Any = NOON, **kw: Any) -> Any:
    producer = DictProducer({D0: packet} if packet is not None else {})
    runner = Runner(
        store,
        producer,
        config=SweepConfig(enabled=True),
        cohort=members(["*"]),
        claimant="test-1",
        **kw,
    )
    return runner.run(at)


def packet(store: SqliteSweepStore, *cands: Any) -> DailySweepInput:
    return day_packet(owners.get(store, "alice"), D0, cands)


def staged_bytes(store: SqliteSweepStore) -> bytes:
    w = window_for("Europe/Paris", D0)
    with store.transaction(write=False) as tx:
        st = tx.stage("alice", D0, 1, w.window_id)
    assert st is not None
    return st.packet


def everything(store: SqliteSweepStore) -> str:
    """Every fact, journal row and receipt of alice, and the stage, as one text."""
    s = snapshot(store, "alice")
    rows = [s["facts"], s["journal"], s["receipts"], s["triggers"]]
    return msgspec.json.encode(rows).decode() + staged_bytes(store).decode()


def test_a_fact_quoting_a_key_is_kept_redacted_everywhere(store: SqliteSweepStore) -> None:
    text = f"deploys with the token {GITHUB} from the team vault"
    report = run(store, packet(store, fact("deploy", text=text), fact("pet")))
    (day,) = report.owners[0].days
    assert (day.status, day.writes, day.redacted) == ("complete", 2, 1)
    assert report.totals()["redacted"] == 1
    assert "redacted" in msgspec.to_builtins(report.owners[0].days[0])
    s = snapshot(store, "alice")
    deploy = next(f for f in s["facts"] if f.entity == "deploy")
    assert deploy.text == "deploys with the token [REDACTED:github-token] from the team vault"
    assert [j.after for j in s["journal"] if j.target == "fact:owner/deploy"] == [deploy.text]
    assert GITHUB not in everything(store)
    # The receipts keep the digests of the staged (redacted) candidates, which is what a
    # retry after a crash reads back (test_sweep_crash runs that with a real kill).
    staged = msgspec.json.decode(staged_bytes(store), type=DailySweepInput)
    digests = {r.digest for r in s["receipts"] if r.kind == "candidate"}
    assert digests == {digest(c) for c in staged.candidates}
    assert "[REDACTED:github-token]" in staged.candidates[0].text  # type: ignore[union-attr]


def test_an_allowed_fingerprint_is_kept_in_clear(store: SqliteSweepStore) -> None:
    text = f"the demo token {GITHUB} is public"
    report = run(
        store, packet(store, fact("demo", text=text)), allow=frozenset({fingerprint(GITHUB)})
    )
    assert report.owners[0].days[0].redacted == 0
    (f,) = snapshot(store, "alice")["facts"]
    assert f.text == text


def test_a_stage_kept_in_clear_is_redacted_when_applied(store: SqliteSweepStore) -> None:
    # A stage an earlier version wrote without redacting: its receipts must keep its own
    # digests (no digest_mismatch), and the fact must still be kept redacted.
    p = packet(store, fact("deploy", text=f"token {GITHUB}"))
    w = window_for("Europe/Paris", D0)
    with store.transaction() as tx:
        tx.put_stage(
            StagedPacket(
                owner="alice",
                local_date=D0,
                source_generation=1,
                window_id=w.window_id,
                digest=digest(p),
                packet=encode_packet(p),
                created_at=NOON,
            )
        )
    report = run(store, None)
    (day,) = report.owners[0].days
    assert (day.status, day.writes, day.redacted) == ("complete", 1, 1)
    s = snapshot(store, "alice")
    assert [f.text for f in s["facts"]] == ["token [REDACTED:github-token]"]
    assert {r.digest for r in s["receipts"] if r.kind == "candidate"} == {digest(p.candidates[0])}
    assert s["cursor"].local_date == D0


def test_a_trigger_keyword_that_is_a_key_is_redacted(store: SqliteSweepStore) -> None:
    owners.add_standing_trigger(
        store,
        "alice",
        "alert",
        {"schema": "tether_trigger.v1", "when": {"op": "keyword", "words": ["outage"]}},
        now=NOON,
    )
    cond = {
        "schema": "tether_trigger.v1",
        "when": {"op": "any", "of": [{"op": "keyword", "words": ["outage", SLACK]}]},
    }
    cand = TriggerRepair(
        source_key="s1", trigger_id="alert", condition=cond, authority="direct_user_statement"
    )
    report = run(store, packet(store, cand))
    (day,) = report.owners[0].days
    assert (day.status, day.reasons, day.redacted) == ("complete", {"repaired": 1}, 1)
    (alert,) = snapshot(store, "alice")["triggers"]
    assert "[REDACTED:slack-token]" in alert.condition
    assert '"outage"' in alert.condition
    assert SLACK not in everything(store)


def test_a_secret_in_an_id_refuses_the_day_and_writes_nothing(store: SqliteSweepStore) -> None:
    key = "xoxb-" + "123456789012-1234567890123-" + "abcdefghijklmnopqrstuvwx"
    p = msgspec.structs.replace(packet(store, fact("deploy", source=key)), sources=(key,))
    report = run(store, p)
    (o,) = report.owners
    assert (o.status, o.reason) == ("refused", "secret_in_key")
    s = snapshot(store, "alice")
    assert s["facts"] == s["receipts"] == s["journal"] == []
    assert s["cursor"] is None
