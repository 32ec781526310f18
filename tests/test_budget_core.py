"""The budget gate's decision and the usage report, as pure functions (Hypothesis)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from tether.core.context import tokens
from tether.core.spend.budget_rules import (
    Bound,
    Caps,
    Prices,
    bound_usd,
    decide,
    local_day,
    prompt_tokens,
    usage_usd,
)
from tether.core.spend.usage_rows import LoggedUsage, report, turn_kind
from tether.core.sweep.windows import window_for
from tether.records import ChatMessage, SpendRow, SpentToday
from tether.testing.fake_protocol import render

caps_st = st.builds(
    Caps,
    call_tokens=st.none() | st.integers(0, 5000),
    day_tokens=st.none() | st.integers(0, 50_000),
    day_usd=st.none() | st.floats(0, 10),
)
prices_st = st.builds(
    Prices,
    usd_per_mtok_in=st.floats(0, 100),
    usd_per_mtok_out=st.floats(0, 100),
    usd_per_mtok_cached=st.floats(0, 100),
)
bound_st = st.builds(Bound, prompt=st.integers(0, 4000), max_tokens=st.integers(0, 2000))
zones = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Apia"])
moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)


@given(bound_st, prices_st)
def test_no_caps_never_refuse(bound: Bound, prices: Prices) -> None:
    assert decide(Caps(), SpentToday(tokens=10**9, usd=10**6), bound, prices) is None


@given(caps_st, bound_st, prices_st, st.integers(0, 60_000), st.floats(0, 20))
def test_a_call_let_through_keeps_every_cap(
    caps: Caps, bound: Bound, prices: Prices, tokens_spent: int, usd_spent: float
) -> None:
    spent = SpentToday(tokens=tokens_spent, usd=usd_spent)
    if decide(caps, spent, bound, prices) is not None:
        return
    if caps.call_tokens is not None:
        assert bound.tokens <= caps.call_tokens
    if caps.day_tokens is not None:
        assert spent.tokens + bound.tokens <= caps.day_tokens
    if caps.day_usd is not None:
        assert spent.usd + bound_usd(bound, prices) <= caps.day_usd


@given(caps_st, bound_st, prices_st, st.integers(0, 60_000), st.integers(0, 60_000))
def test_spending_more_never_turns_a_refusal_into_a_pass(
    caps: Caps, bound: Bound, prices: Prices, a: int, b: int
) -> None:
    low, high = sorted((a, b))
    if decide(caps, SpentToday(tokens=low), bound, prices) is not None:
        assert decide(caps, SpentToday(tokens=high), bound, prices) is not None


@given(caps_st, prices_st, st.lists(bound_st, max_size=40))
def test_a_day_of_reservations_never_passes_its_caps(
    caps: Caps, prices: Prices, bounds: list[Bound]
) -> None:
    spent = SpentToday()
    for b in bounds:
        if decide(caps, spent, b, prices) is None:
            spent = SpentToday(spent.tokens + b.tokens, spent.usd + bound_usd(b, prices))
    if caps.day_tokens is not None:
        assert spent.tokens <= caps.day_tokens
    if caps.day_usd is not None:
        assert spent.usd <= caps.day_usd + 1e-9


def test_reasons_come_in_one_order() -> None:
    bound = Bound(prompt=90, max_tokens=20)
    prices = Prices(usd_per_mtok_in=1_000_000.0)
    full = SpentToday(tokens=1000, usd=5.0)
    assert decide(Caps(call_tokens=100, day_tokens=10), full, bound, prices) == "budget_call"
    assert decide(Caps(day_tokens=1000, day_usd=1.0), full, bound, prices) == "budget_daily"
    assert decide(Caps(day_usd=89.0), SpentToday(), bound, prices) == "budget_usd"
    assert decide(Caps(day_usd=90.0), SpentToday(), bound, prices) is None


@given(zones, moments)
def test_the_local_day_is_the_date_whose_window_holds_the_moment(name: str, now: datetime) -> None:
    day = local_day(ZoneInfo(name), now)
    window = window_for(name, day)
    assert window.start_utc <= now < window.end_utc


@given(st.lists(st.text(max_size=200), min_size=1, max_size=6))
def test_the_prompt_count_is_what_the_fake_server_counts(texts: list[str]) -> None:
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    messages = [ChatMessage(role=r, content=t) for r, t in zip(roles, texts, strict=False)]  # type: ignore[arg-type]
    rendered = render([], [{"role": m.role, "content": m.content} for m in messages])
    assert prompt_tokens(messages) == len(rendered)
    assert prompt_tokens(messages) >= sum(tokens.count(t) for t in texts)


def test_usage_is_priced_by_kind_of_token() -> None:
    prices = Prices(usd_per_mtok_in=2.0, usd_per_mtok_out=8.0, usd_per_mtok_cached=0.5)
    assert usage_usd(1_000_000, 500_000, 250_000, prices) == 0.5 + 1.0 + 2.0


usage_st = st.builds(
    LoggedUsage,
    session=st.sampled_from(["mm-a", "heartbeat", "job-brief-t1700000000", "cli"]),
    slot=st.sampled_from([0, 1]),
    time=moments,
    cache_n=st.integers(0, 5000),
    prompt_n=st.integers(0, 5000),
    predicted_n=st.integers(0, 500),
)


@given(
    st.lists(usage_st, max_size=30),
    zones,
    st.sampled_from(["kind", "day", "session"]),
    st.none() | st.dates(date(2020, 1, 1), date(2035, 1, 1)),
)
def test_the_report_adds_up_to_the_usage_records(
    logged: list[LoggedUsage], zone: str, by: str, since: date | None
) -> None:
    prices = Prices(1.0, 2.0, 0.1)
    tz = ZoneInfo(zone)
    done = report(logged, [], zone=tz, prices=prices, by=by, since=since, main_slot=0)  # type: ignore[arg-type]
    kept = [u for u in logged if since is None or local_day(tz, u.time) >= since]
    for field in ("cache_n", "prompt_n", "predicted_n"):
        want = sum(getattr(u, field) for u in kept)
        assert getattr(done.total, field) == want
        assert sum(getattr(line, field) for line in done.lines) == want
    assert sum(line.calls for line in done.lines) == len(kept)
    if by == "kind":
        assert {line.key for line in done.lines} == {turn_kind(u.session) for u in kept}


def test_the_ledger_adds_summaries_and_refusals_but_not_turns_twice() -> None:
    now = datetime(2026, 11, 1, 9, tzinfo=UTC)

    def row(kind: str, state: str, **kw: int) -> SpendRow:
        return SpendRow(
            time=now,
            day="2026-11-01",
            kind=kind,  # type: ignore[arg-type]
            session="mm-a",
            state=state,  # type: ignore[arg-type]
            reason="budget_daily" if state == "refused" else None,
            bound_tokens=100,
            bound_usd=0.0,
            **kw,
        )

    logged = [LoggedUsage("heartbeat", 1, now, 10, 20, 3)]
    ledger = [
        row("heartbeat", "settled", cache_n=10, prompt_n=20, predicted_n=3),  # also in the log
        row("compaction", "settled", cache_n=0, prompt_n=70, predicted_n=30),
        row("heartbeat", "refused"),
        row("tool_summary", "reserved"),  # in flight: not spent yet
    ]
    done = report(logged, ledger, zone=UTC, prices=Prices(), by="kind", since=None, main_slot=0)
    by_key = {line.key: line for line in done.lines}
    assert (by_key["heartbeat"].calls, by_key["heartbeat"].refused) == (1, 1)
    assert by_key["compaction"].prompt_n == 70
    assert done.total.prompt_n == 90
    assert done.main_cache_hit_share is None  # no main-slot turn
    later = now + timedelta(days=1)
    share = report(
        [LoggedUsage("mm-a", 0, later, 90, 10, 1)],
        [],
        zone=UTC,
        prices=Prices(),
        by="day",
        since=None,
        main_slot=0,
    )
    assert share.main_cache_hit_share == 0.9


def test_extraction_calls_count_once_whether_gated_or_not_and_failures_apart() -> None:
    from tether.core.spend.usage_rows import CallRecord

    now = datetime(2026, 11, 1, 9, tzinfo=UTC)

    def call(kind: str, *, ok: bool, gated: bool, reason: str | None = None) -> CallRecord:
        return CallRecord(
            time=now,
            kind=kind,  # type: ignore[arg-type]
            session=kind,
            ok=ok,
            reason=reason,
            gated=gated,
            prompt_n=100 if ok else 0,
            predicted_n=10 if ok else 0,
        )

    ledger = [  # the gated sweep call, settled in the ledger
        SpendRow(
            time=now,
            day="2026-11-01",
            kind="sweep",
            session="sweep",
            state="settled",
            bound_tokens=500,
            bound_usd=0.0,
            prompt_n=100,
            predicted_n=10,
        )
    ]
    calls = [
        call("harvest", ok=True, gated=False),
        call("harvest", ok=True, gated=False),
        call("harvest", ok=False, gated=False, reason="model_output_malformed"),
        call("harvest", ok=False, gated=False, reason="model_timeout"),
        call("sweep", ok=True, gated=True),  # its tokens are the ledger's
        call("sweep", ok=False, gated=True, reason="model_timeout"),
    ]
    done = report(
        [], ledger, zone=UTC, prices=Prices(), by="kind", since=None, main_slot=0, calls=calls
    )
    by_key = {line.key: line for line in done.lines}
    assert (by_key["harvest"].calls, by_key["harvest"].failed) == (2, 2)
    assert by_key["harvest"].prompt_n == 200
    assert (by_key["sweep"].calls, by_key["sweep"].failed, by_key["sweep"].prompt_n) == (1, 1, 100)
    assert (done.total.calls, done.total.failed) == (3, 3)
