"""The sweep's pure core, property-tested: windows, packets, authority, trigger conditions."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.sweep.authority import (
    RANK,
    Occupant,
    TriggerState,
    decide_fact,
    decide_trigger,
    plan_day,
    within_write_bound,
)
from tether.core.sweep.errors import REASONS, ConditionError, PacketError
from tether.core.sweep.packet import (
    AUTHORITIES,
    DailySweepInput,
    FactCandidate,
    SourceRef,
    TriggerRepair,
    decode_packet,
    encode_packet,
    validate_packet,
)
from tether.core.sweep.triggers import compile_condition, compile_text, reject_payloads
from tether.core.sweep.windows import (
    BadDateError,
    BadZoneError,
    is_complete,
    local_today,
    parse_date,
    plan_dates,
    window_for,
)

ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Pacific/Apia",
    "America/St_Johns",
    "Asia/Tokyo",
    "Africa/Casablanca",
]
dates = st.dates(min_value=date(1990, 1, 1), max_value=date(2037, 12, 31))
zones = st.sampled_from(ZONES)


@given(zones, dates)
@settings(max_examples=300)
def test_windows_tile_utc_half_open(tz: str, day: date) -> None:
    w = window_for(tz, day)
    nxt = window_for(tz, day + timedelta(days=1))
    assert w.start_utc < w.end_utc == nxt.start_utc  # no gap, no overlap
    assert w.start_utc.tzinfo is UTC
    assert w.end_utc.tzinfo is UTC
    zi = ZoneInfo(tz)
    assert w.start_utc.astimezone(zi).date() == day
    assert (w.end_utc - timedelta(microseconds=1)).astimezone(zi).date() == day
    assert w.end_utc.astimezone(zi).date() == day + timedelta(days=1)
    assert 21 <= w.hours <= 27


@given(zones, dates)
def test_window_id_is_deterministic_and_distinct(tz: str, day: date) -> None:
    assert window_for(tz, day) == window_for(tz, day)
    assert window_for(tz, day).window_id != window_for(tz, day + timedelta(days=1)).window_id
    other = "Asia/Tokyo" if tz != "Asia/Tokyo" else "UTC"
    assert window_for(tz, day).window_id != window_for(other, day).window_id


@pytest.mark.parametrize(
    ("tz", "day", "hours", "start"),
    [
        ("America/New_York", "2026-03-08", 23, "2026-03-08T05:00:00+00:00"),
        ("America/New_York", "2026-11-01", 25, "2026-11-01T04:00:00+00:00"),
        ("Europe/Paris", "2026-03-29", 23, "2026-03-28T23:00:00+00:00"),
        ("Europe/Paris", "2026-10-25", 25, "2026-10-24T22:00:00+00:00"),
        ("Europe/Paris", "2026-07-01", 24, "2026-06-30T22:00:00+00:00"),
        ("Australia/Lord_Howe", "2026-04-05", 24.5, "2026-04-04T13:00:00+00:00"),
    ],
)
def test_dst_days(tz: str, day: str, hours: float, start: str) -> None:
    w = window_for(tz, date.fromisoformat(day))
    assert w.hours == hours
    assert w.start_utc == datetime.fromisoformat(start)


def test_midnight_in_a_gap_starts_at_the_shift() -> None:
    # Santiago springs forward at 00:00 -> 01:00 (2026-09-06): the day starts at 04:00Z.
    w = window_for("America/Santiago", date(2026, 9, 6))
    assert w.hours == 23
    assert w.start_utc.astimezone(ZoneInfo("America/Santiago")).hour == 1


@given(zones, st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2036, 1, 1)))
def test_todays_partial_window_is_never_planned(tz: str, naive: datetime) -> None:
    now = naive.replace(tzinfo=UTC)
    today = local_today(tz, now)
    plan = plan_dates(tz, now, today - timedelta(days=10))
    assert len(plan.dates) == 3
    assert all(is_complete(window_for(tz, d), now) for d in plan.dates)
    assert not is_complete(window_for(tz, today), now)
    assert plan_dates(tz, now, today).dates == ()
    requested = plan_dates(tz, now, today - timedelta(days=1), (today, today - timedelta(days=1)))
    assert requested.dates == (today - timedelta(days=1),)
    assert requested.refused == ((today, "partial_window"),)


def test_requested_dates_in_order_and_limited() -> None:
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    due = date(2026, 11, 10)
    days = tuple(date(2026, 11, d) for d in (9, 10, 11, 12, 13, 15))
    plan = plan_dates("UTC", now, due, days)
    assert plan.dates == (date(2026, 11, 10), date(2026, 11, 11), date(2026, 11, 12))
    assert dict(plan.refused) == {
        date(2026, 11, 9): "already_complete",
        date(2026, 11, 13): "per_run_limit",
        date(2026, 11, 15): "out_of_order",
    }


def test_bad_zone_and_date_are_bad_input() -> None:
    for name in ["Mars/Olympus", "", "../etc/passwd", "localtime", "+05:00"]:
        with pytest.raises(BadZoneError):
            window_for(name, date(2026, 1, 1))
    for text in ["2026-02-30", "20260101", "tomorrow"]:
        with pytest.raises(BadDateError):
            parse_date(text)


# -- packets ---------------------------------------------------------------------------


def packet(candidates: tuple[Any, ...] = (), **over: Any) -> DailySweepInput:
    w = window_for("Europe/Paris", date(2026, 10, 25))
    base = DailySweepInput(
        owner="alice",
        local_date=w.local_date,
        account_generation=1,
        source_generation=1,
        timezone_name=w.timezone_name,
        window_id=w.window_id,
        window_start_utc=w.start_utc,
        window_end_utc=w.end_utc,
        complete=True,
        candidates=candidates,
        sources=("s1",),
    )
    return msgspec.structs.replace(base, **over)


def fact(i: int = 0, authority: Any = "sweep_inference", **over: Any) -> FactCandidate:
    base = FactCandidate(
        source_key="s1", subject="owner", entity=f"e{i}", text=f"fact {i}", authority=authority
    )
    return msgspec.structs.replace(base, **over)


def check(p: DailySweepInput) -> None:
    validate_packet(
        p,
        owner="alice",
        window=window_for("Europe/Paris", date(2026, 10, 25)),
        account_generation=1,
        source_generation=1,
    )


def reason(p: DailySweepInput) -> str:
    with pytest.raises(PacketError) as info:
        check(p)
    return info.value.reason


def test_packet_bounds() -> None:
    check(packet())  # explicit complete-zero packet
    check(packet(tuple(fact(i) for i in range(32))))
    assert reason(packet(complete=False)) == "incomplete_packet"
    assert reason(packet(tuple(fact(i) for i in range(33)))) == "too_many_candidates"
    assert reason(packet((fact(text="x" * 1001),))) == "content_too_long"
    refs = tuple(SourceRef(kind="session", session=f"c{i}") for i in range(9))
    assert reason(packet((fact(refs=refs),))) == "too_many_refs"
    check(packet((fact(refs=refs[:8]),)))
    assert reason(packet((fact(authority="owner_said"),))) == "bad_content"
    assert reason(packet((fact(source_key="s9"),))) == "unknown_source"
    assert reason(packet((fact(entity="Bad Key"),))) == "bad_content"
    assert reason(packet(account_generation=2)) == "stale_generation"
    assert reason(packet(source_generation=0)) == "stale_generation"
    assert reason(packet(owner="bob")) == "owner_mismatch"
    assert reason(packet(timezone_name="UTC")) == "window_mismatch"
    assert reason(packet(window_end_utc=datetime(2026, 10, 26, tzinfo=UTC))) == "window_mismatch"


def test_staged_packets_decode_strictly() -> None:
    p = packet((fact(),))
    assert decode_packet(encode_packet(p)) == p
    raw = msgspec.json.decode(encode_packet(p))
    raw["candidates"][0]["text_extra"] = "?"
    with pytest.raises(PacketError) as info:
        decode_packet(msgspec.json.encode(raw))
    assert info.value.reason == "stage_malformed"


# -- authority ---------------------------------------------------------------------------

authorities = st.sampled_from(AUTHORITIES)


@given(authorities, st.one_of(st.none(), authorities))
def test_only_a_stronger_candidate_amends(cand: str, occ: str | None) -> None:
    d = decide_fact(cand, None if occ is None else Occupant(occ, "x"))  # type: ignore[arg-type]
    if occ is None:
        assert d.action == "add"
    elif RANK[cand] > RANK[occ]:
        assert d.action == "amend"
    else:
        assert d.action == "skip"
        assert d.reason in {"equal_authority", "lower_authority"}
    assert d.reason in REASONS


@given(st.lists(st.tuples(st.integers(0, 3), authorities), max_size=40))
def test_a_day_never_holds_two_facts_per_slot_and_authority_only_rises(
    items: list[tuple[int, str]],
) -> None:
    cands = [fact(i, a) for i, a in items]
    decisions = plan_day(cands, {}, {})
    best: dict[str, int] = {}
    for c, d in zip(cands, decisions, strict=True):
        before = best.get(c.entity)
        assert d.writes == (before is None or RANK[c.authority] > before)
        if d.writes:
            best[c.entity] = RANK[c.authority]
    # replaying the same day again writes nothing (no duplicate across days)
    slots = {("owner", c.entity): Occupant(c.authority, c.text) for c in cands}
    final = {k: v for k, v in slots.items()}
    for c, d in zip(cands, decisions, strict=True):
        if d.writes:
            final[("owner", c.entity)] = Occupant(c.authority, c.text)
    assert not any(d.writes for d in plan_day(cands, final, {}))


def test_write_bound() -> None:
    assert within_write_bound(plan_day([fact(i) for i in range(16)], {}, {}))
    assert not within_write_bound(plan_day([fact(i) for i in range(17)], {}, {}))
    assert within_write_bound(plan_day([fact(0)] * 32, {}, {}))


COND = {
    "schema": "tether_trigger.v1",
    "when": {"op": "time_of_day", "after": "07:00", "before": "09:00"},
}


def repair(authority: Any = "direct_user_statement", cond: Any = None) -> TriggerRepair:
    new = cond or {"schema": "tether_trigger.v1", "when": {"op": "weekday", "days": ["mon"]}}
    return TriggerRepair(source_key="s1", trigger_id="t1", condition=new, authority=authority)


def test_triggers_are_only_repaired_never_created() -> None:
    standing = TriggerState("direct_user_statement", compile_text(COND), "standing_trigger", True)
    assert decide_trigger(repair(), None).reason == "no_standing_trigger"
    inferred = msgspec.structs.replace(standing, provenance="sweep_inference")
    assert decide_trigger(repair(), inferred).reason == "not_standing_trigger"
    off = msgspec.structs.replace(standing, active=False)
    assert decide_trigger(repair(), off).reason == "trigger_inactive"
    assert decide_trigger(repair("sweep_inference"), standing).reason == "lower_authority"
    assert decide_trigger(repair(cond=COND), standing).reason == "unchanged"
    assert decide_trigger(repair(), standing).action == "repair"


# -- trigger conditions ----------------------------------------------------------------

leaf = st.sampled_from(
    [
        {"op": "time_of_day", "after": "07:00", "before": "09:30"},
        {"op": "weekday", "days": ["mon", "fri"]},
        {"op": "keyword", "words": ["groceries"]},
        {"op": "folder", "name": "work"},
    ]
)
node = st.recursive(
    leaf,
    lambda kids: st.one_of(
        st.builds(lambda of: {"op": "all", "of": of}, st.lists(kids, min_size=1, max_size=3)),
        st.builds(lambda of: {"op": "any", "of": of}, st.lists(kids, min_size=1, max_size=3)),
        st.builds(lambda k: {"op": "not", "of": [k]}, kids),
    ),
    max_leaves=6,
)
payloads = st.sampled_from(
    [
        b"\x89PNG",
        bytearray(b"raw"),
        "data:image/png;base64,iVBORw0KGgo=",
        base64.b64encode(bytes(range(64))).decode(),
    ]
)
payload_keys = st.sampled_from(["raw", "image", "base64", "bytes", "Data"])


def _depth(n: dict[str, Any]) -> int:
    return 1 + max((_depth(k) for k in n.get("of", [])), default=0)


@given(node)
def test_valid_conditions_compile_canonically(when: dict[str, Any]) -> None:
    cond = {"when": when, "schema": "tether_trigger.v1"}
    if _depth(when) > 6:
        return
    text = compile_text(cond)
    assert compile_text(msgspec.json.decode(text)) == text


def _plant(tree: Any, path: list[int], key: str, value: Any) -> Any:
    """Put ``key: value`` into the dict reached by following ``path`` through lists."""
    if isinstance(tree, dict):
        kids = tree.get("of")
        if path and isinstance(kids, list):
            i = path[0] % len(kids)
            return {
                **tree,
                "of": [*kids[:i], _plant(kids[i], path[1:], key, value), *kids[i + 1 :]],
            }
        return {**tree, key: value}
    return tree


@given(node, st.lists(st.integers(0, 5), max_size=6), payload_keys, payloads)
def test_payloads_are_rejected_at_every_depth(
    when: dict[str, Any], path: list[int], key: str, value: Any
) -> None:
    cond = {"schema": "tether_trigger.v1", "when": when}
    for planted in (_plant(when, path, key, "x"), _plant(when, path, "note", value)):
        with pytest.raises(ConditionError) as info:
            compile_condition({**cond, "when": planted})
        assert info.value.reason == "forbidden_payload"
    with pytest.raises(ConditionError):
        reject_payloads([[[{"a": [value]}]]])


def test_schema_is_strict_and_versioned() -> None:
    for bad in [
        {"schema": "tether_trigger.v2", "when": COND["when"]},
        {"schema": "tether_trigger.v1", "when": {"op": "shell", "cmd": "ls"}},
        {"schema": "tether_trigger.v1", "when": {**COND["when"], "extra": 1}},  # type: ignore[dict-item]
        {
            "schema": "tether_trigger.v1",
            "when": {"op": "time_of_day", "after": "25:00", "before": "x"},
        },
    ]:
        with pytest.raises(ConditionError) as info:
            compile_condition(bad)
        assert info.value.reason == "bad_trigger_condition"
    deep: dict[str, Any] = COND["when"]  # type: ignore[assignment]
    for _ in range(7):
        deep = {"op": "not", "of": [deep]}
    with pytest.raises(ConditionError):
        compile_condition({"schema": "tether_trigger.v1", "when": deep})
