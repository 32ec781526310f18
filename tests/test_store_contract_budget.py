"""The budget ledger's contract (``stores/budget.py``, written once), on every backend
(``conftest.backend``: SQLite always; PostgreSQL with TETHER_TEST_POSTGRES, else skipped
with the reason): a reservation is weighed against the day's totals and recorded with
them in one transaction, a settle moves the totals from the bound to the use once, and
two callers at once can never both slip under a cap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

from tether.ports import Store
from tether.records import BudgetReason, SpendRow, SpendSettle, SpentToday

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
DAY = "2026-11-01"


def call(session: str = "s1", *, tokens: int = 100, usd: float = 0.5) -> SpendRow:
    return SpendRow(
        time=T0,
        day=DAY,
        kind="sweep",
        session=session,
        state="reserved",
        bound_tokens=tokens,
        bound_usd=usd,
    )


def cap(tokens: int) -> Callable[[SpentToday], BudgetReason | None]:
    def decide(spent: SpentToday) -> BudgetReason | None:
        return "budget_daily" if spent.tokens + 100 > tokens else None

    return decide


def test_a_reservation_counts_its_bound_until_settled_at_its_use(any_store: Store) -> None:
    first = any_store.budget_reserve(call(), lambda _: None)
    assert first.state == "reserved"
    assert first.id > 0
    assert any_store.budget_spent(DAY, "sweep") == SpentToday(tokens=100, usd=0.5)
    assert any_store.budget_settle(first.id, tokens=40, usd=0.25, prompt_n=30, predicted_n=10)
    assert any_store.budget_spent(DAY, "sweep") == SpentToday(tokens=40, usd=0.25)
    # settling twice moves nothing
    assert not any_store.budget_settle(first.id, tokens=999, usd=9.0)
    assert any_store.budget_spent(DAY, "sweep") == SpentToday(tokens=40, usd=0.25)
    (row,) = any_store.budget_rows()
    assert (row.state, row.tokens, row.prompt_n, row.predicted_n) == ("settled", 40, 30, 10)


def test_a_refused_call_is_recorded_and_counts_nothing(any_store: Store) -> None:
    any_store.budget_reserve(call(), lambda _: None)
    refused = any_store.budget_reserve(call("s2"), lambda _: "budget_daily")
    assert (refused.state, refused.reason) == ("refused", "budget_daily")
    assert any_store.budget_spent(DAY, "sweep").tokens == 100
    assert [r.state for r in any_store.budget_rows(since=DAY)] == ["reserved", "refused"]
    assert any_store.budget_rows(since="2026-11-02") == []


def test_the_settles_a_reservation_carries_are_weighed_before_it(any_store: Store) -> None:
    first = any_store.budget_reserve(call(tokens=150), lambda _: None)
    seen: list[SpentToday] = []

    def decide(spent: SpentToday) -> BudgetReason | None:
        seen.append(spent)
        return None

    done = SpendSettle(id=first.id, tokens=10, usd=0.0)
    any_store.budget_reserve(call("s2"), decide, [done])
    assert seen == [SpentToday(tokens=10, usd=0.0)]  # the first call at its use, not its bound
    assert any_store.budget_spent(DAY, "sweep").tokens == 110


def test_two_callers_at_once_never_both_slip_under_the_cap(any_store: Store) -> None:
    """Eight threads reserve at once under a cap that admits two: exactly two get in."""
    decide = cap(200)
    start = threading.Barrier(8)
    states: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        start.wait()
        row = any_store.budget_reserve(call(f"s{i}"), decide)
        with lock:
            states.append(row.state)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(states) == ["refused"] * 6 + ["reserved"] * 2
    assert any_store.budget_spent(DAY, "sweep").tokens == 200
