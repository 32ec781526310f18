"""The sweep's model pass over a completed day, against the fake llama-server with
scripted phase-A and phase-B replies: real sessions, the real indexer and SQLite, the
stage file on disk, a real child process killed between stage and apply."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from daemon_helpers import tether
from tether.config import load_config
from tether.core.sweep.windows import window_for
from tether.daemon.compose import run_sweep
from tether.memory.indexer import index_home
from tether.records import Assistant, Baseline, SessionMeta, User
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import stage
from tether.testing.fake_llama import FakeLlama, Reply

DAY = date(2026, 11, 1)
T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
NOW = datetime(2026, 11, 2, 12, tzinfo=UTC)
BACKGROUND = 1


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=65536, parallel=2) as f:
        yield f


def configure(home: Path, fake: FakeLlama, extra: str = "") -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n\n[sweep]\nenabled = true\n{extra}'
    )


def chat(home: Path, sid: str, *said: str, start: datetime = T0, answer_last: bool = True) -> None:
    """A session on DAY: the owner's lines, each answered by the agent (but the last
    when ``answer_last`` is false: a turn still running)."""
    s = Session.create(home, sid, baseline=Baseline(system="s", memory="m"), slot=0, time=start)
    t = start
    for i, text in enumerate(said):
        t += timedelta(minutes=1)
        s.append(User(time=t, text=text))
        if answer_last or i < len(said) - 1:
            s.append(Assistant(time=t + timedelta(seconds=5), text=f"Noted: {text}"))


def index(home: Path, *, onboarding: bool = False) -> None:
    """Index the home. The runtime marks the owner's first sessions for the onboarding
    channel; these tests are about the daily channel, so the marks are taken off
    unless ``onboarding``."""
    with SqliteStore(home / "tether.db") as store:
        index_home(home, store)
        if not onboarding:
            for meta in store.sessions_meta().values():
                store.put_session_meta(msgspec.structs.replace(meta, onboarding=False))


def page(*memories: dict[str, Any], folders: list[dict[str, str]] | None = None) -> Reply:
    return Reply(content=json.dumps({"memories": list(memories), "folders": folders or []}))


def excerpts(*asked: tuple[str, int, int]) -> Reply:
    return Reply(
        content=json.dumps(
            {"excerpts": [{"session": s, "first_turn": a, "last_turn": b} for s, a, b in asked]}
        )
    )


def facts(home: Path) -> list[tuple[str, str, str]]:
    with SqliteSweepStore(home / "tether.db") as sweep, sweep.transaction(write=False) as tx:
        return [(f.entity, f.text, f.authority) for f in tx.facts("owner")]


def cursor_date(home: Path) -> date | None:
    with SqliteSweepStore(home / "tether.db") as sweep, sweep.transaction(write=False) as tx:
        c = tx.cursor("owner")
    return None if c is None else c.local_date


def stage_lines(home: Path) -> list[dict[str, Any]]:
    lines = stage.path_of(home, "owner", DAY).read_bytes().splitlines()
    return [dict(json.loads(line)) for line in lines]


def stage_of(home: Path) -> dict[str, Any]:
    """Where the invocation is: the stage file's last line."""
    return stage_lines(home)[-1]


def day_status(home: Path, now: datetime = NOW) -> tuple[str, str | None]:
    report = run_sweep(home, load_config(home), now)
    (o,) = report.owners
    d = next(d for d in o.days if d.local_date == DAY.isoformat())
    return d.status, d.reason


CLUB = {
    "text": "The book club meets on Tuesdays",
    "subject": "owner",
    "entity": "book-club",
    "sessions": ["club"],
    "first_turn": 1,
    "last_turn": 1,
    "quote": "moved the book club to Tuesdays",
}


def test_a_day_two_phases_earned_authority_folders_and_dropped_provenance(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    chat(home, "tea", "I switched to green tea this week.")
    index(home)
    fake.script(excerpts(("club", 1, 1)))
    ghost = {"text": "Owner owns a boat", "subject": "owner", "entity": "boat", "sessions": ["x"]}
    fake.script(page(CLUB, ghost, folders=[{"session": "tea", "folder": "Food & drink"}]))
    assert day_status(home) == ("complete", None)
    a, b = fake.requests
    assert (a.slot, b.slot) == (BACKGROUND, BACKGROUND)
    assert a.json_schema is not None
    assert b.json_schema is not None
    assert "excerpts" in a.json_schema["properties"]
    assert "memories" in b.json_schema["properties"]
    spine_text = a.messages[1]["content"]
    assert "## session club (unfiled)" in spine_text
    assert "moved the book club" in spine_text
    assert "[session club turn 1] owner: We moved the book club" in b.messages[-1]["content"]
    assert facts(home) == [("book-club", CLUB["text"], "direct_user_statement")]
    staged = stage_of(home)
    assert staged["state"] == "staged"
    assert staged["counts"]["dropped_provenance"] == 1
    assert staged["counts"]["excerpts"] == 1
    with SqliteStore(home / "tether.db") as store:
        tea = store.session_meta("tea")
    assert tea is not None
    assert (tea.folder, tea.folder_by) == ("Food & drink", "sweep")
    assert cursor_date(home) == DAY
    # The next run: the day is done, no request.
    run_sweep(home, load_config(home), NOW + timedelta(hours=1))
    assert len(fake.requests) == 2


def test_an_unquoted_memory_is_a_sweep_inference_and_an_owner_folder_wins(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    with SqliteStore(home / "tether.db") as store:
        store.put_session_meta(SessionMeta(session="club", folder="Mine", folder_by="owner"))
    fake.script(excerpts())
    guess = {**CLUB, "quote": "the club is on Tuesdays, I decided"}  # never said
    fake.script(page(guess, folders=[{"session": "club", "folder": "Theirs"}]))
    assert day_status(home) == ("complete", None)
    assert facts(home) == [("book-club", CLUB["text"], "sweep_inference")]
    with SqliteStore(home / "tether.db") as store:
        club = store.session_meta("club")
    assert club is not None
    assert club.folder == "Mine"
    # Folders were not offered for a filed session at all.
    assert "folders" not in (fake.requests[1].json_schema or {})["properties"]


def test_at_most_eight_excerpts_each_cut_at_excerpt_chars(home: Path, fake: FakeLlama) -> None:
    configure(home, fake, "excerpt_chars = 200\n")
    chat(home, "long", *[f"Line {i}: " + "words " * 60 for i in range(12)])
    index(home)
    fake.script(Reply(content="Twelve lines of words."))  # the session-day digest
    fake.script(excerpts(*[("long", i, i) for i in range(1, 13)]))
    fake.script(page())
    assert day_status(home) == ("complete", None)
    assert stage_of(home)["counts"]["excerpts"] == 8
    served = fake.requests[-1].messages[-1]["content"]
    blocks = served.split("The excerpts you asked for:\n", 1)[1].split("\n\nUnfiled")[0]
    parts = blocks.split("\n\n")
    assert len(parts) == 8
    assert all(len(p) <= 200 for p in parts)


def test_malformed_output_leaves_the_day_incomplete_and_never_asks_again(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    fake.script(excerpts())
    fake.script(Reply(content="Sure! Here are your memories: the club is on Tuesdays."))
    assert day_status(home) == ("incomplete", "model_output_malformed")
    assert stage_of(home)["state"] == "failed"
    assert day_status(home, NOW + timedelta(days=1)) == ("incomplete", "model_output_malformed")
    assert len(fake.requests) == 2
    assert facts(home) == []
    assert cursor_date(home) is None


def test_over_the_ceiling_no_request_is_made(home: Path, fake: FakeLlama) -> None:
    configure(home, fake, "max_model_tokens = 2000\n")
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    assert day_status(home) == ("incomplete", "cost_ceiling")
    assert fake.requests == []
    assert not stage.path_of(home, "owner", DAY).exists()
    # Priced too: tokens fit, money does not.
    configure(home, fake, "model_usd_per_mtok_in = 100.0\nmax_model_cost_usd = 0.5\n")
    assert day_status(home) == ("incomplete", "cost_ceiling")
    assert fake.requests == []


def test_a_stage_of_an_older_schema_attests_an_empty_page(home: Path, fake: FakeLlama) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    path = stage.path_of(home, "owner", DAY)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": stage.STAGE_PREFIX + "v1", "whatever": 1}))
    assert day_status(home) == ("complete", None)
    assert fake.requests == []
    assert facts(home) == []
    assert cursor_date(home) == DAY


def test_a_malformed_or_half_written_stage_never_calls_the_model(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    path = stage.path_of(home, "owner", DAY)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert day_status(home) == ("incomplete", "stage_malformed")
    w = window_for("UTC", DAY)
    invoked = stage.StageFile(
        schema=stage.STAGE_SCHEMA,
        state="invoked",
        invocation="x",
        owner="owner",
        local_date=DAY,
        window_id=w.window_id,
        source_generation=1,
    )
    path.unlink()  # the unreadable record cleared, as the runbook says
    assert stage.mark(stage.FileStages(home), invoked)
    # Marked by a holder whose lease runs (this process): busy, never a second call.
    assert day_status(home) == ("busy", "invocation_busy")
    assert fake.requests == []
    # A power cut that tore the outcome appended after the mark: the torn line is not
    # read, so the day still says invoked (held), and the model is not called again.
    staged = msgspec.structs.replace(invoked, state="failed", reason="model_failed")
    stage.outcome(stage.FileStages(home), staged)
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    assert day_status(home) == ("busy", "invocation_busy")
    path.write_bytes(data)
    assert day_status(home) == ("incomplete", "model_failed")
    assert fake.requests == []


def test_discarded_and_running_sessions_are_left_out(home: Path, fake: FakeLlama) -> None:
    configure(home, fake)
    chat(home, "kept", "We moved the book club to Tuesdays.")
    chat(home, "binned", "My password hint is blue.")
    chat(home, "running", "Plan my trip to Rome.", answer_last=False)
    chat(home, "later", "Plan my trip to Oslo.", start=T0 + timedelta(days=1), answer_last=False)
    index(home)
    with SqliteStore(home / "tether.db") as store:
        store.put_session_meta(SessionMeta(session="binned", discarded_at=T0))
    fake.script(excerpts())
    fake.script(page())
    assert day_status(home) == ("complete", None)
    spine_text = fake.requests[0].messages[1]["content"]
    assert "kept" in spine_text
    assert "binned" not in spine_text
    assert "Rome" not in spine_text
    assert "Oslo" not in spine_text  # another day's window
    enum = fake.requests[1].json_schema
    assert enum is not None
    sessions = enum["properties"]["memories"]["items"]["properties"]["sessions"]["items"]
    assert sessions["enum"] == ["kept"]
    counts = stage_of(home)["counts"]
    assert (counts["discarded"], counts["processing"]) == (1, 1)


def test_a_long_session_gets_one_digest_kept_in_the_store(home: Path, fake: FakeLlama) -> None:
    configure(home, fake)
    chat(home, "long", *[f"Point {i}: " + "details " * 30 for i in range(6)])
    index(home)
    fake.script(Reply(content="They planned six points about the garden."))
    fake.script(Reply(status=500, error_body="boom"))  # phase A fails: the day stops
    assert day_status(home) == ("incomplete", "model_failed")
    digest = fake.requests[0]
    assert digest.json_schema is None
    assert digest.slot == BACKGROUND
    # An operator re-opens the day (the runbook's way): the digest is not made again.
    stage.path_of(home, "owner", DAY).unlink()
    fake.script(excerpts())
    fake.script(page())
    assert day_status(home) == ("complete", None)
    assert len(fake.requests) == 4
    spine_text = fake.requests[2].messages[1]["content"]
    assert "[digest of the rest of the day] They planned six points" in spine_text
    assert "details details" not in spine_text


@pytest.mark.slow
def test_crash_between_the_mark_and_the_call_is_busy_within_its_lease(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    fake.script(excerpts(("club", 1, 1)))
    fake.script(page(CLUB))
    env = {"TETHER_TEST_NOW": NOW.isoformat(), "TETHER_CRASH_AT": "sweep-after-invoked"}
    out = tether(home, "sweep", "run", "--json", env=env)
    assert out.returncode == -9, out.stderr
    assert [line["state"] for line in stage_lines(home)] == ["invoked"]
    assert fake.requests == []
    # The mark was made, so the call may have been too: within the mark's lease the retry
    # never calls, and says the day is held (tests/test_sweep_takeover.py: after it).
    again = tether(home, "sweep", "run", "--json", env={"TETHER_TEST_NOW": NOW.isoformat()})
    assert again.returncode == 0, again.stderr
    (owner,) = json.loads(again.stdout)["owners"]
    (day,) = [d for d in owner["days"] if d["local_date"] == DAY.isoformat()]
    assert (day["status"], day["reason"]) == ("busy", "invocation_busy")
    assert fake.requests == []
    assert facts(home) == []


@pytest.mark.slow
def test_crash_between_stage_and_apply_then_a_retry_sends_nothing(
    home: Path, fake: FakeLlama
) -> None:
    configure(home, fake)
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    fake.script(excerpts(("club", 1, 1)))
    fake.script(page(CLUB))
    env = {"TETHER_TEST_NOW": NOW.isoformat(), "TETHER_CRASH_AT": "sweep-after-stage"}
    out = tether(home, "sweep", "run", "--json", env=env)
    assert out.returncode == -9, out.stderr
    assert [line["state"] for line in stage_lines(home)] == ["invoked", "staged"]
    assert facts(home) == []
    assert len(fake.requests) == 2
    again = tether(home, "sweep", "run", "--json", env={"TETHER_TEST_NOW": NOW.isoformat()})
    assert again.returncode == 0, again.stderr
    assert len(fake.requests) == 2
    assert facts(home) == [("book-club", CLUB["text"], "direct_user_statement")]
    assert cursor_date(home) == DAY
    third = tether(home, "sweep", "run", "--json", env={"TETHER_TEST_NOW": NOW.isoformat()})
    assert third.returncode == 0, third.stderr
    assert facts(home) == [("book-club", CLUB["text"], "direct_user_statement")]
    assert len(fake.requests) == 2


def test_sessions_belong_to_owners_import_lines_may_say_whose(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    configure(home, fake)
    lines = [
        {"session": "bobs", "role": "user", "text": "Bob's plan.", "time": "2026-11-01T10:00:00Z",
         "owner": "bob"},
        {"session": "bobs", "role": "assistant", "text": "Ok.", "time": "2026-11-01T10:00:05Z"},
        {"session": "mine", "role": "user", "text": "My plan.", "time": "2026-11-01T11:00:00Z"},
    ]  # fmt: skip
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr
    shown = tether(home, "session", "show", "bobs", "--json")
    assert json.loads(shown.stdout)["owner"] == "bob"
    assert json.loads(tether(home, "session", "show", "mine", "--json").stdout)["owner"] == "owner"
    assert "owner     bob" in tether(home, "session", "show", "bobs").stdout
    fake.script(excerpts())
    fake.script(page())
    assert day_status(home) == ("complete", None)
    spine_text = fake.requests[0].messages[1]["content"]
    assert "My plan." in spine_text
    assert "Bob's plan." not in spine_text


def test_session_discard_undo_and_folder_from_the_command_line(home: Path) -> None:
    chat(home, "club", "We moved the book club to Tuesdays.")
    assert tether(home, "session", "discard", "club").returncode == 0
    assert json.loads(tether(home, "session", "show", "club", "--json").stdout)["discarded"]
    assert tether(home, "session", "discard", "club", "--undo").returncode == 0
    doc = json.loads(tether(home, "session", "show", "club", "--json").stdout)
    assert doc["discarded"] is False
    assert tether(home, "session", "folder", "club", "Hobbies").returncode == 0
    doc = json.loads(tether(home, "session", "show", "club", "--json").stdout)
    assert (doc["folder"], doc["folder_by"]) == ("Hobbies", "owner")
    bad = tether(home, "session", "folder", "club", "a/b")
    assert bad.returncode == 2
    assert "folder 'a/b'" in bad.stderr
    assert tether(home, "session", "discard", "ghost").returncode == 2


def test_the_onboarding_channel_has_its_own_page_and_cursor(home: Path, fake: FakeLlama) -> None:
    configure(home, fake)
    for i, said in enumerate(["I am Ada, I write compilers.", "I like green tea.", "Hi.", "Yo."]):
        chat(home, f"first-{i}", said, start=T0 + timedelta(minutes=10 * i))
    index(home, onboarding=True)
    with SqliteStore(home / "tether.db") as store:
        marked = sorted(m.session for m in store.sessions_meta().values() if m.onboarding)
    assert marked == ["first-0", "first-1", "first-2"]  # the runtime marks the first three
    # The daily channel is stuck on a malformed stage; onboarding goes on regardless.
    path = stage.path_of(home, "owner", DAY)
    path.parent.mkdir(parents=True)
    path.write_text("{broken")
    ada = {**CLUB, "text": "Ada writes compilers", "entity": "work", "sessions": ["first-0"]}
    ada["quote"] = "I write compilers"
    fake.script(page(ada))
    fake.script(page())
    report = run_sweep(home, load_config(home), NOW)
    (o,) = report.owners
    assert [(c.session, c.status) for c in o.onboarding] == [
        ("first-0", "complete"),
        ("first-1", "complete"),
    ]
    assert [(d.status, d.reason) for d in o.days] == [("incomplete", "stage_malformed")]
    assert facts(home) == [("work", "Ada writes compilers", "direct_user_statement")]
    assert len(fake.requests) == 2
    assert all(r.slot == BACKGROUND for r in fake.requests)
    # Next run: the next page (first-2); the first two are done (their source receipts).
    fake.script(page())
    report = run_sweep(home, load_config(home), NOW + timedelta(hours=1))
    assert [c.session for c in report.owners[0].onboarding] == ["first-2"]
    report = run_sweep(home, load_config(home), NOW + timedelta(hours=2))
    assert report.owners[0].onboarding == []
    assert len(fake.requests) == 3
    assert cursor_date(home) is None  # the daily cursor never moved for onboarding
