"""What the sweep reads of a day (``stores/days.py``, written once), on every backend
(``conftest.backend``: SQLite always; PostgreSQL with TETHER_TEST_POSTGRES, else skipped
with the reason): session metadata, the onboarding mark, a day's rows by owner, epoch
summaries (also for more sessions than one statement names) and session-day digests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tether.ports import Store
from tether.records import (
    EpochSummary,
    IndexCursor,
    LogRow,
    SessionDigest,
    SessionMeta,
    SessionState,
)
from tether.stores.days import ONBOARDING_SESSIONS

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


def state(
    session: str, *, imported: bool = False, open_since: datetime | None = None
) -> SessionState:
    return SessionState(
        session=session, first_time=T0, open_since=open_since, open_known=True, imported=imported
    )


def test_only_the_first_sessions_not_imported_are_marked_onboarding(any_store: Store) -> None:
    any_store.track_sessions([state("imp", imported=True)])
    any_store.track_sessions([state(f"s{i}") for i in range(ONBOARDING_SESSIONS + 2)])
    meta = any_store.sessions_meta()
    assert not meta["imp"].onboarding
    assert meta["imp"].imported
    marked = sorted(s for s, m in meta.items() if m.onboarding)
    assert marked == [f"s{i}" for i in range(ONBOARDING_SESSIONS)]
    assert meta["s0"].first_seen == T0


def test_a_known_session_keeps_its_row_and_learns_its_open_turn(any_store: Store) -> None:
    any_store.track_sessions([state("s1")])
    any_store.put_session_meta(
        SessionMeta(session="s1", owner="bob", folder="work", folder_by="owner")
    )
    any_store.track_sessions([state("s1", open_since=T0 + timedelta(minutes=5))])
    meta = any_store.session_meta("s1")
    assert meta is not None
    assert (meta.owner, meta.folder, meta.open_since) == ("bob", "work", T0 + timedelta(minutes=5))
    assert any_store.session_meta("nobody") is None


def _row(session: str, turn: int, text: str, minutes: int) -> LogRow:
    return LogRow(
        session=session,
        epoch=0,
        turn=turn,
        field="user",
        text=text,
        tainted=False,
        time=T0 + timedelta(minutes=minutes),
    )


def test_a_days_rows_are_the_owners_sessions_in_the_window(any_store: Store) -> None:
    cursor = IndexCursor(path="x/0.jsonl", offset=1, turn=3, tainted=False, lines=3)
    any_store.index_log_rows(
        [
            _row("bobs", 1, "tea at nine", 0),
            _row("bobs", 2, "lunch at noon", 180),
            _row("homes", 1, "the home owner's own", 10),
            _row("bobs", 3, "next day", 60 * 24),
        ],
        cursor,
    )
    any_store.put_session_meta(SessionMeta(session="bobs", owner="bob"))
    end = T0 + timedelta(hours=12)
    assert [r.text for r in any_store.day_rows(T0, end, owner="bob")] == [
        "tea at nine",
        "lunch at noon",
    ]
    home = any_store.day_rows(T0, end, owner="me", home=True)
    assert [r.text for r in home] == ["the home owner's own"]
    assert [r.turn for r in any_store.session_turns("bobs", 2, 3)] == [2, 3]


def test_epoch_summaries_for_more_sessions_than_one_statement_names(any_store: Store) -> None:
    sessions = [f"s{i:04}" for i in range(1200)]
    any_store.put_epoch_summaries(
        [EpochSummary(session=s, epoch=0, time=T0, text=f"summary of {s}") for s in sessions]
    )
    # written again: replaced, not doubled
    any_store.put_epoch_summaries(
        [EpochSummary(session="s0001", epoch=0, time=T0, text="summary, revised")]
    )
    end = T0 + timedelta(hours=1)
    found = any_store.epoch_summaries(T0, end, sessions=sessions[::-1])
    assert [s.session for s in found] == sessions
    assert found[1].text == "summary, revised"
    assert len(any_store.epoch_summaries(T0, end)) == 1200
    assert any_store.epoch_summaries(end, end + timedelta(hours=1)) == []
    assert len(any_store.sessions_meta(sessions)) == 0  # summaries make no metadata


def test_a_session_day_digest_is_kept_once(any_store: Store) -> None:
    first = SessionDigest(session="s1", window_id="w", content_hash="h", text="one", time=T0)
    any_store.put_session_digest(first)
    any_store.put_session_digest(
        SessionDigest(session="s1", window_id="w", content_hash="h", text="two", time=T0)
    )
    assert any_store.session_digest("s1", "w", "h") == first
    assert any_store.session_digest("s1", "w", "other") is None
