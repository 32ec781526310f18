"""The sweep's rules end to end on real SQLite, in process (crash tests are elsewhere)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from sweep_helpers import DictProducer, day_packet, fact, snapshot, utc
from tether.config import SweepConfig
from tether.core.sweep.errors import OwnerExistsError, SweepFencedError
from tether.core.sweep.packet import TriggerRepair, digest
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import window_for
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import apply, cursor, owners, receipts
from tether.sweep.fence import DayContext
from tether.sweep.producer import DeterministicProducer
from tether.sweep.runner import CohortResolver, Runner, members, report_json

OPEN = SweepConfig(enabled=True)
EVERYONE = members(["*"])
D1, D2, D3 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)
ADDED = utc("2026-11-01T08:00:00+00:00")  # first_date = 2026-10-31 in Paris


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSweepStore]:
    s = SqliteSweepStore(tmp_path / "tether.db")
    owners.add(s, "alice", "Europe/Paris", ADDED)
    yield s
    s.close()


def noon(day: date) -> datetime:
    return utc(f"{day.isoformat()}T12:00:00+00:00")


def runner(
    store: SqliteSweepStore,
    producer: object,
    config: SweepConfig = OPEN,
    cohort: CohortResolver = EVERYONE,
    claimant: str = "test-1",
) -> Runner:
    return Runner(store, producer, config=config, cohort=cohort, claimant=claimant)  # type: ignore[arg-type]


def alice(store: SqliteSweepStore) -> Owner:
    return owners.get(store, "alice")


def test_closed_by_default_and_kill_switch_overrides(store: SqliteSweepStore) -> None:
    producer = DeterministicProducer()
    for config in (SweepConfig(), SweepConfig(enabled=True, kill_switch=True)):
        report = runner(store, producer, config).run(noon(D3))
        assert report.status in {"closed", "killed"}
        assert report.owners == []
    s = snapshot(store, "alice")
    assert s["receipts"] == []
    assert s["cursor"] is None
    assert s["facts"] == []


def test_owner_not_definitely_in_cohort_gets_no_writes(store: SqliteSweepStore) -> None:
    def broken(owner: str) -> bool:
        raise RuntimeError("flag service down")

    for cohort, reason in [
        (members(["bob"]), "not_in_cohort"),
        (broken, "cohort_unavailable"),
        (lambda _: None, "cohort_unavailable"),
    ]:
        report = runner(store, DeterministicProducer(), cohort=cohort).run(noon(D3))
        assert [(o.status, o.reason) for o in report.owners] == [("skipped", reason)]
    s = snapshot(store, "alice")
    assert s["receipts"] == []
    assert s["cursor"] is None
    with store.transaction(write=False) as tx:
        assert (
            tx.stage(
                "alice",
                date(2026, 10, 31),
                1,
                window_for("Europe/Paris", date(2026, 10, 31)).window_id,
            )
            is None
        )


def test_a_day_adds_facts_commits_receipts_and_moves_the_cursor(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    p = day_packet(o, d0, (fact("home"), fact("job", "direct_user_statement")), ("s1",))
    report = runner(store, DictProducer({d0: p})).run(utc("2026-11-01T12:00:00+00:00"))
    (result,) = report.owners
    assert result.status == "ok"
    assert [(d.local_date, d.status, d.writes) for d in result.days] == [
        ("2026-10-31", "complete", 2)
    ]
    s = snapshot(store, "alice")
    assert sorted(f.entity for f in s["facts"]) == ["home", "job"]
    assert len(s["journal"]) == 2
    assert [r.kind for r in s["receipts"]] == ["candidate", "candidate", "source"]
    assert all(r.state == "committed" for r in s["receipts"])
    w = window_for("Europe/Paris", d0)
    assert s["cursor"].local_date == d0
    assert s["cursor"].window_id == w.window_id
    assert s["cursor"].timezone_name == "Europe/Paris"
    assert s["cursor"].window_end_utc - s["cursor"].window_start_utc == timedelta(hours=24)
    # Output and telemetry hold no memory text.
    text = msgspec.json.encode(report_json(report)).decode()
    assert "home by" not in text
    assert "job by" not in text


def test_no_duplicate_fact_across_days_and_only_stronger_amends(store: SqliteSweepStore) -> None:
    o = alice(store)
    days = [date(2026, 10, 31), D1, D2, D3]
    packets = {
        days[0]: day_packet(o, days[0], (fact("home", "agent_reusable_conclusion", "Lyon"),)),
        days[1]: day_packet(o, days[1], (fact("home", "agent_reusable_conclusion", "Lyon"),)),
        days[2]: day_packet(o, days[2], (fact("home", "sweep_inference", "Nice"),)),
        days[3]: day_packet(o, days[3], (fact("home", "direct_user_statement", "Paris"),)),
    }
    r = runner(store, DictProducer(packets))
    r.run(noon(D3))  # three dates at most: 10-31, 11-01, 11-02
    s = snapshot(store, "alice")
    assert s["cursor"].local_date == D2
    assert [(f.text, f.authority) for f in s["facts"]] == [("Lyon", "agent_reusable_conclusion")]
    assert [c.outcome for c in s["receipts"] if c.kind == "candidate"] == [
        "added",
        "equal_authority",
        "lower_authority",
    ]
    r.run(noon(D3 + timedelta(days=1)))
    s = snapshot(store, "alice")
    assert [(f.text, f.authority) for f in s["facts"]] == [("Paris", "direct_user_statement")]
    assert [(j.action, j.before, j.after) for j in s["journal"]] == [
        ("fact_add", None, "Lyon"),
        ("fact_amend", "Lyon", "Paris"),
    ]


def test_equal_authority_from_a_later_window_replaces_the_occupant_journalled(
    store: SqliteSweepStore,
) -> None:
    o = alice(store)
    d0 = date(2026, 10, 31)
    club = "direct_user_statement"
    packets = {
        d0: day_packet(o, d0, (fact("club", club, "Book club on Mondays"),)),
        D1: day_packet(o, D1, (fact("club", club, "Book club on Tuesdays"),)),
        D2: day_packet(o, D2, (fact("club", "agent_reusable_conclusion", "Book club on Fridays"),)),
    }
    runner(store, DictProducer(packets)).run(noon(D3))
    s = snapshot(store, "alice")
    assert [f.text for f in s["facts"]] == ["Book club on Tuesdays"]
    assert [c.outcome for c in s["receipts"] if c.kind == "candidate"] == [
        "added",
        "amended_later_window",
        "lower_authority",
    ]
    assert [(j.action, j.before, j.after) for j in s["journal"]] == [
        ("fact_add", None, "Book club on Mondays"),
        ("fact_amend", "Book club on Mondays", "Book club on Tuesdays"),
    ]


def test_at_most_three_dates_and_never_today(store: SqliteSweepStore) -> None:
    producer = DeterministicProducer()
    now = noon(date(2026, 11, 10))
    report = runner(store, producer).run(now)
    assert [d.local_date for d in report.owners[0].days] == [
        "2026-10-31",
        "2026-11-01",
        "2026-11-02",
    ]
    report = runner(store, producer).run(now, dates=[date(2026, 11, 10), date(2026, 11, 3)])
    assert [d.local_date for d in report.owners[0].days] == ["2026-11-03"]
    assert report.owners[0].refused_dates == [("2026-11-10", "partial_window")]


def test_empty_day_needs_an_explicit_complete_zero_packet(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    missing = runner(store, DictProducer()).run(noon(D1))
    assert missing.owners[0].days[0].status == "incomplete"
    assert snapshot(store, "alice")["cursor"] is None
    partial = msgspec.structs.replace(day_packet(o, d0), complete=False)
    refused = runner(store, DictProducer({d0: partial})).run(noon(D1))
    assert refused.owners[0].reason == "incomplete_packet"
    assert snapshot(store, "alice")["cursor"] is None
    zero = runner(store, DictProducer({d0: day_packet(o, d0, (), ())})).run(noon(D1))
    assert zero.owners[0].status == "ok"
    assert snapshot(store, "alice")["cursor"].local_date == d0


def test_too_many_writes_refuses_the_whole_day(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    p = day_packet(o, d0, tuple(fact(f"e{i}") for i in range(17)))
    report = runner(store, DictProducer({d0: p})).run(noon(D1))
    assert report.owners[0].reason == "too_many_writes"
    s = snapshot(store, "alice")
    assert s["facts"] == []
    assert s["receipts"] == []
    assert s["cursor"] is None


def test_live_claim_is_busy_expired_claim_is_taken_over(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    p = day_packet(o, d0, (fact("home"),))
    ctx = DayContext.of(o, window_for("Europe/Paris", d0))
    t = noon(D1)
    # A runner that died after the canonical apply, before completing the receipt.
    held = receipts.claim(
        store,
        ctx,
        kind="candidate",
        source_key="s1",
        ordinal=0,
        digest=digest(p.candidates[0]),
        claimant="dead",
        now=t,
    )
    assert (
        apply.apply_candidate(store, ctx, held.receipt_id, p.candidates[0], claimant="dead", now=t)
        == "added"
    )
    busy = runner(store, DictProducer({d0: p}), claimant="live").run(t + timedelta(seconds=30))
    assert busy.owners[0].status == "busy"
    assert snapshot(store, "alice")["cursor"] is None
    later = runner(store, DictProducer({d0: p}), claimant="next-day").run(t + timedelta(days=1))
    assert later.owners[0].days[0].reasons == {"applied_earlier": 1}
    s = snapshot(store, "alice")
    assert len(s["facts"]) == 1
    assert len(s["journal"]) == 1
    (cand,) = [r for r in s["receipts"] if r.kind == "candidate"]
    assert cand.state == "committed"
    assert cand.claimant == "next-day"
    assert cand.attempts == 2
    assert s["cursor"].local_date == d0


def test_triggers_are_repaired_never_created(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    cond = {"schema": "tether_trigger.v1", "when": {"op": "weekday", "days": ["mon"]}}
    owners.add_standing_trigger(
        store,
        "alice",
        "gym",
        {"schema": "tether_trigger.v1", "when": {"op": "weekday", "days": ["tue"]}},
        now=ADDED,
    )
    cands = (
        TriggerRepair(
            source_key="s1", trigger_id="gym", condition=cond, authority="direct_user_statement"
        ),
        TriggerRepair(
            source_key="s1", trigger_id="new", condition=cond, authority="direct_user_statement"
        ),
        TriggerRepair(
            source_key="s1",
            trigger_id="gym",
            condition={"schema": "tether_trigger.v1", "when": {"op": "folder", "name": "x"}},
            authority="sweep_inference",
        ),
    )
    report = runner(store, DictProducer({d0: day_packet(o, d0, cands)})).run(noon(D1))
    assert report.owners[0].days[0].reasons == {
        "lower_authority": 1,
        "no_standing_trigger": 1,
        "repaired": 1,
    }
    s = snapshot(store, "alice")
    (gym,) = s["triggers"]
    assert gym.provenance == "standing_trigger"
    assert '"mon"' in gym.condition
    (entry,) = s["journal"]
    assert entry.action == "trigger_repair"
    assert '"source_key":"s1"' in entry.evidence


def test_payload_in_a_trigger_refuses_the_packet(store: SqliteSweepStore) -> None:
    d0 = date(2026, 10, 31)
    o = alice(store)
    bad = {
        "schema": "tether_trigger.v1",
        "when": {"op": "all", "of": [{"op": "folder", "name": "x", "image": "y"}]},
    }
    cand = TriggerRepair(
        source_key="s1", trigger_id="gym", condition=bad, authority="direct_user_statement"
    )
    report = runner(store, DictProducer({d0: day_packet(o, d0, (cand,))})).run(noon(D1))
    assert report.owners[0].reason == "forbidden_payload"
    assert snapshot(store, "alice")["receipts"] == []


def test_zone_change_blocks_until_reconciled(store: SqliteSweepStore) -> None:
    producer = DeterministicProducer()
    runner(store, producer).run(noon(D1))
    before = snapshot(store, "alice")["cursor"]
    owners.set_timezone(store, "alice", "America/New_York")
    blocked = runner(store, producer).run(noon(D3))
    assert (blocked.owners[0].status, blocked.owners[0].reason) == (
        "blocked",
        "timezone_changed_requires_reconciliation",
    )
    assert blocked.failed
    assert snapshot(store, "alice")["cursor"] == before
    done = cursor.reconcile(store, "alice", noon(D3))
    assert (done.status, done.namespace) == ("reconciled", 2)
    after = snapshot(store, "alice")["cursor"]
    assert (after.local_date, after.window_id) == (before.local_date, before.window_id)
    assert cursor.reconcile(store, "alice", noon(D3)).status == "nothing_to_reconcile"
    ran = runner(store, producer).run(noon(D3))
    assert [d.local_date for d in ran.owners[0].days] == ["2026-11-01", "2026-11-02"]
    s = snapshot(store, "alice")
    assert s["cursor"].timezone_name == "America/New_York"
    assert {r.namespace for r in s["receipts"] if r.local_date > before.local_date} == {2}
    assert s["owner"].source_generation == 1


def test_source_generation_rollover_keeps_the_window_and_rejects_stale_packets(
    store: SqliteSweepStore,
) -> None:
    o = alice(store)
    d0 = date(2026, 10, 31)
    runner(store, DictProducer({d0: day_packet(o, d0, (fact("home"),))})).run(noon(D1))
    before = snapshot(store, "alice")["cursor"]
    assert owners.roll_source_generation(store, "alice", 1) == 2
    with pytest.raises(SweepFencedError):
        owners.roll_source_generation(store, "alice", 1)
    assert snapshot(store, "alice")["cursor"] == before
    stale = runner(store, DictProducer({D1: day_packet(o, D1, (fact("home"),))})).run(noon(D2))
    assert stale.owners[0].reason == "stale_generation"
    fresh = day_packet(alice(store), D1, (fact("home"),))
    ok = runner(store, DictProducer({D1: fresh})).run(noon(D2))
    assert ok.owners[0].days[0].reasons == {"equal_authority": 1}
    s = snapshot(store, "alice")
    assert len(s["facts"]) == 1
    assert len(s["journal"]) == 1


def test_deleted_owner_is_wiped_and_never_written_again(store: SqliteSweepStore) -> None:
    producer = DeterministicProducer()
    runner(store, producer).run(noon(D2))
    o = alice(store)
    ctx = DayContext.of(o, window_for("Europe/Paris", D2))
    done = owners.delete(store, "alice", noon(D3))
    assert done.rows_wiped > 0
    s = snapshot(store, "alice")
    assert s["facts"] == s["journal"] == s["receipts"] == []
    assert s["cursor"] is None
    assert s["owner"].deleted_at is not None
    report = runner(store, producer).run(noon(D3), owners=["alice"])
    assert report.owners[0].reason == "owner_deleted"
    with pytest.raises(SweepFencedError) as info:
        receipts.claim(
            store,
            ctx,
            kind="candidate",
            source_key="s",
            ordinal=0,
            digest="d",
            claimant="x",
            now=noon(D3),
        )
    assert info.value.reason == "owner_deleted"
    assert snapshot(store, "alice")["receipts"] == []
    with pytest.raises(OwnerExistsError):
        owners.add(store, "alice", "UTC", noon(D3))
