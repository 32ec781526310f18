"""`tether ui` over real HTTP on loopback, no browser: the guard (no token, no way in; a
spent token; another origin; another Host), the views answering, and the socket bound to
127.0.0.1 only. The browser half is tests/test_ui_browser.py."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon_helpers import tether
from tether.core.context.memory_block import entry_id
from ui_helpers import SECRET, Served, build_home, csrf_of, logged_in, serve_ui

pytestmark = pytest.mark.slow

GETS = [
    "/",
    "/sessions",
    "/sessions/work",
    "/sessions/work?page=1",
    "/sessions/work/turns/4",
    "/segments/anything",
    "/recall?q=kumquat",
    "/memory",
    "/facts",
    "/journal",
    "/sweep",
    "/jobs",
    "/usage",
    "/usage?by=day",
    "/scan",
    "/static/ui.css",
    "/no-such-page",
]
POSTS = [
    "/memory/identity/m-000000/edit",
    "/memory/identity/m-000000/remove",
    "/memory/notes/1/promote",
    "/scan/redact",
    "/sessions/work/discard",
    "/logout",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = build_home(tmp_path_factory.mktemp("ui"))
    with serve_ui(home) as s:
        yield s


def test_without_the_token_every_route_is_refused(served: Served) -> None:
    with httpx.Client(base_url=served.base, timeout=30) as anon:
        for path in GETS:
            r = anon.get(path, follow_redirects=False)
            assert r.status_code == 403, path
            assert "not logged in" in r.text
            assert "kumquat" not in r.text
        for path in POSTS:
            r = anon.post(path, data={"csrf": "x"}, headers={"origin": served.base})
            assert r.status_code == 403, path
        bad = anon.get("/", headers={"cookie": "tether_ui=made-up"})
        assert bad.status_code == 403
        wrong = anon.get("/login?token=not-a-token", follow_redirects=False)
        assert wrong.status_code == 403
        assert "set-cookie" not in wrong.headers


def test_the_token_logs_in_once_and_pages_answer(served: Served) -> None:
    client = logged_in(served, served.login)
    try:
        again = httpx.get(served.login, follow_redirects=False, timeout=30)
        assert again.status_code == 403  # spent
        cookie = client.cookies.get("tether_ui")
        assert cookie is not None
        for path in [p for p in GETS if p not in ("/segments/anything", "/no-such-page")]:
            r = client.get(path)
            assert r.status_code in (200, 303), (path, r.status_code, r.text[:400])
            csp = r.headers["content-security-policy"]
            assert "default-src 'none'" in csp
            assert "script-src" not in csp  # no script may run at all
            assert r.headers["x-frame-options"] == "DENY"
        assert client.get("/segments/anything").status_code == 400  # not a segment name
        assert client.get("/no-such-page").status_code == 404
        # The secret memory.md holds is named, never shown.
        scan = client.get("/scan").text
        assert "memory.md" in scan
        assert SECRET not in scan
        assert SECRET not in client.get("/memory").text
        # The tokens are stored hashed: neither the login token nor the cookie is on disk.
        auth = (served.home / "ui" / "auth.json").read_text()
        assert cookie not in auth
        assert served.login.split("token=")[1] not in auth
        assert oct(os.stat(served.home / "ui" / "auth.json").st_mode & 0o777) == "0o600"
    finally:
        client.close()


def test_a_request_from_another_origin_is_refused(served: Served) -> None:
    client = logged_in(served)
    try:
        page = client.get("/memory").text
        token = csrf_of(page)
        form = {"csrf": token, "text": "hijacked"}
        for headers in (
            {"origin": "http://evil.example"},
            {"origin": "http://127.0.0.1:1"},
            {"origin": "null"},
            {},  # no Origin at all
            {"origin": served.base, "sec-fetch-site": "cross-site"},
        ):
            r = client.post("/memory/identity/m-000000/edit", data=form, headers=headers)
            assert r.status_code == 403, headers
        no_csrf = client.post(
            "/memory/identity/m-000000/edit", data={"text": "x"}, headers={"origin": served.base}
        )
        assert no_csrf.status_code == 403
        assert "hijacked" not in client.get("/memory").text
        # Another Host (a DNS-rebinding name pointing at 127.0.0.1) is refused too.
        rebound = client.get("/memory", headers={"host": f"evil.example:{served.port}"})
        assert rebound.status_code == 421
    finally:
        client.close()


def test_an_action_keeps_the_cli_rules(served: Served) -> None:
    client = logged_in(served)
    try:
        page = client.get("/memory").text
        token = csrf_of(page)
        origin = {"origin": served.base}
        # An untrusted note is never promoted.
        untrusted = client.post("/memory/notes/3/promote", data={"csrf": token}, headers=origin)
        assert untrusted.status_code == 400
        assert "untrusted" in untrusted.text
        # A secret typed into an edit is refused, as `memory add` refuses it.
        eid = entry_id("prefers tea over coffee")
        assert f'<tr id="{eid}">' in page
        refused = client.post(
            f"/memory/identity/{eid}/edit",
            data={"csrf": token, "text": f"token {SECRET}"},
            headers=origin,
        )
        assert refused.status_code == 400
        assert SECRET not in refused.text
        assert SECRET not in client.get("/journal").text
        # `tether session discard` exists, so the page offers it (the CLI's own command).
        assert "discard from the sweep" in client.get("/sessions/work").text
    finally:
        client.close()


def test_discarding_from_the_page_is_what_session_discard_does(served: Served) -> None:
    client = logged_in(served)
    try:
        token = csrf_of(client.get("/sessions/work").text)
        origin = {"origin": served.base}
        done = client.post("/sessions/work/discard", data={"csrf": token}, headers=origin)
        assert done.status_code == 303
        assert done.headers["location"] == "/sessions/work"
        shown = tether(served.home, "session", "show", "work", "--json")
        assert json.loads(shown.stdout)["discarded"] is True
        # An unknown session is refused, as `tether session discard ghost` refuses it.
        ghost = client.post("/sessions/ghost/discard", data={"csrf": token}, headers=origin)
        assert ghost.status_code == 400
        assert "ghost" in ghost.text
    finally:
        assert tether(served.home, "session", "discard", "work", "--undo").returncode == 0
        client.close()


def _listening_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def test_it_never_listens_beyond_loopback(served: Served) -> None:
    mine = _listening_inodes(served.proc.pid)
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in mine:  # LISTEN, a socket of the child
                    listening.append((table, cols[1]))
    assert listening, "the child listens on no TCP socket"
    for table, local in listening:
        assert table == "/proc/net/tcp", local  # IPv4 only, no [::]
        assert local.split(":")[0] == "0100007F", local  # 127.0.0.1
        assert int(local.split(":")[1], 16) == served.port
    # And from outside loopback: this machine's other address does not answer.
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: it picks the outgoing address
        outside = probe.getsockname()[0]
    finally:
        probe.close()
    if outside.startswith("127."):
        pytest.skip("this machine has no address beyond loopback to try")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((outside, served.port), timeout=2).close()


def test_a_long_session_pages_by_turns_and_a_turn_link_finds_its_page(tmp_path: Path) -> None:
    from tether.home import init_home
    from tether.records import Assistant, Baseline, User
    from tether.sessions import Session
    from tether.ui.reading import TURNS_PER_PAGE, page_of_turn, session_page
    from ui_helpers import T0

    home = tmp_path / "home"
    init_home(home)
    base = Baseline(system="s", memory="")
    s = Session.create(home, "long", baseline=base, slot=0, time=T0)
    s.append(
        *[
            r
            for i in range(70)
            for r in (User(time=T0, text=f"q{i + 1}"), Assistant(time=T0, text="a"))
        ]
    )
    s.end_epoch(summary="first seventy", baseline=base, time=T0)
    s.append(
        *[
            r
            for i in range(70, 120)
            for r in (User(time=T0, text=f"q{i + 1}"), Assistant(time=T0, text="a"))
        ]
    )
    assert TURNS_PER_PAGE == 50
    last = session_page(home, "long", 3)
    assert (last.nav.page, last.nav.pages) == (3, 3)
    owner = [line for line in last.lines if line.role == "owner"]
    assert [line.turn for line in owner] == list(range(101, 121))
    assert owner[0].text == "q101"
    middle = session_page(home, "long", 2)
    markers = [line for line in middle.lines if line.role == "epoch"]
    assert [(m.epoch, m.turn) for m in markers] == [(1, 71)]  # epoch 1 began before turn 71
    assert [e.turns for e in middle.epochs] == [70, 50]
    assert middle.epochs[0].summary == "first seventy"
    assert page_of_turn(100) == 2
    assert page_of_turn(101) == 3
    assert session_page(home, "long", 99).nav.page == 3  # clamped


def test_tether_serve_serves_the_page_beside_its_socket() -> None:
    import re
    import signal

    from daemon_helpers import daemon_home, spawn
    from tether.daemon.api import DaemonClient
    from tether.testing.fake_llama import FakeLlama

    with FakeLlama(n_ctx=4096, parallel=2) as fake, daemon_home(fake.url) as home:
        proc = spawn(home, "serve", "--ui", "--ui-port", "0")
        try:
            assert proc.stdout is not None
            found = re.search(r"(http://127\.0\.0\.1:\d+)(/login\S+)", proc.stdout.readline())
            assert found is not None
            with httpx.Client(base_url=found.group(1), timeout=30) as client:
                assert client.get("/sessions").status_code == 403
                assert client.get(found.group(2)).status_code == 303
                assert "Sessions" in client.get("/sessions").text
            daemon = DaemonClient(home, timeout_s=5)
            try:
                assert daemon.alive()  # the daemon's own socket answers too
            finally:
                daemon.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err


def test_the_session_list_reads_a_log_again_once_it_changed(tmp_path: Path) -> None:
    from tether.home import init_home
    from tether.records import Assistant, Baseline, User
    from tether.sessions import Session
    from tether.ui.reading import session_rows
    from ui_helpers import T0

    home = tmp_path / "home"
    init_home(home)
    s = Session.create(home, "a", baseline=Baseline(system="s", memory=""), slot=0, time=T0)
    s.append(User(time=T0, text="one"), Assistant(time=T0, text="ok"))
    assert [r.turns for r in session_rows(home, 1)[1]] == [1]
    assert [r.turns for r in session_rows(home, 1)[1]] == [1]  # from what it read
    s.append(User(time=T0, text="two"), Assistant(time=T0, text="ok"))
    assert [r.turns for r in session_rows(home, 1)[1]] == [2]
    (home / "sessions" / "a" / "0.jsonl").write_text("not json\n")
    [broken] = session_rows(home, 1)[1]
    assert broken.error is not None


def test_the_benchmark_builds_the_session_it_claims(tmp_path: Path) -> None:
    from bench_helpers import load_benchmark
    from tether.home import init_home
    from tether.sessions import Session

    bench = load_benchmark("ui_pages")
    home = tmp_path / "home"
    init_home(home)
    bench.write_session(home, "long", 101)
    s = Session.open(home, "long")
    assert s.turns() == 101
    assert s.epochs == [0, 1]


def test_recall_shows_each_hits_day_and_lists_them_in_time_order(served: Served) -> None:
    from ui_helpers import T0

    client = logged_in(served)
    try:
        ranked = client.get("/recall?q=kumquat").text
        day = T0.strftime("%Y-%m-%d")
        assert f'<td class="date">{day}</td>' in ranked
        in_time = client.get("/recall?q=kumquat&order=time").text
        assert 'name="order" value="time" checked' in in_time

        def turns(page: str) -> list[int]:
            # turn hits only: a summary unit ("work turns 1-101") is dated by its last turn
            return [
                int(n) for n in re.findall(r'href="/sessions/work/turns/(\d+)">work turn ', page)
            ]

        # the work session's turns were written one a minute: in time order they ascend
        assert sorted(turns(ranked)) == turns(in_time)
        assert len(turns(in_time)) > 1
    finally:
        client.close()
