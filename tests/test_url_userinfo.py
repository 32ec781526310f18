"""A URL's userinfo (``scheme://user:password@host``) is never printed or logged (issue
34, item 4): not by an ``[llm] url`` error, ``tether doctor``, ``session show``, the
daemon's log or the egress log. Child processes, as a user runs them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from daemon_helpers import Daemon, daemon_home, tether
from tether.config import load_config
from tether.scan.urls import shown_url
from tether.testing.fake_llama import FakeLlama
from tether.tools.egress import Egress

PASSWORD = "Hunter2pw"  # the user name is hidden as well: it can be a token
USER = "samtok"


def _llm(home: Path, url: str) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{url}"\ntimeout_s = 2\n')


def test_an_unreachable_llm_url_is_named_without_its_userinfo(home: Path) -> None:
    _llm(home, f"http://{USER}:{PASSWORD}@127.0.0.1:1")
    done = tether(home, "chat", "hello")
    assert done.returncode == 1
    assert "127.0.0.1:1" in done.stderr  # the server is named ...
    assert PASSWORD not in done.stderr  # ... its credential is not
    assert USER not in done.stderr
    doctor = tether(home, "doctor")
    assert "127.0.0.1:1" in doctor.stdout + doctor.stderr
    assert PASSWORD not in doctor.stdout + doctor.stderr
    assert USER not in doctor.stdout + doctor.stderr


def test_session_show_of_a_url_does_not_echo_its_password(home: Path) -> None:
    done = tether(home, "session", "show", f"postgres://{USER}:{PASSWORD}@db.example/x")
    assert done.returncode == 2
    assert PASSWORD not in done.stderr
    assert USER not in done.stderr


def test_the_daemon_log_names_the_llm_without_its_userinfo(fake: FakeLlama) -> None:
    with daemon_home(fake.url) as home:
        _llm(home, fake.url.replace("http://", f"http://{USER}:{PASSWORD}@"))
        code, err = Daemon(home).stop()
    assert code == 0
    assert "serving" in err
    assert PASSWORD not in err
    assert USER not in err


@pytest.mark.anyio
async def test_the_egress_log_hides_a_refused_urls_userinfo(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx.AsyncClient() as http:
        egress = Egress(http, load_config(home).tools, home=home)
        with caplog.at_level(logging.WARNING, "tether.egress"):
            got = await egress.fetch(
                f"http://{USER}:{PASSWORD}@10.0.0.1/admin",
                session="chat",
                tainted=False,
                owner_urls=frozenset(),
                time=datetime(2026, 11, 1, tzinfo=UTC),
            )
    assert got.reason == "private"  # type: ignore[union-attr]
    assert "10.0.0.1" in caplog.text
    assert PASSWORD not in caplog.text
    assert USER not in caplog.text
    assert PASSWORD not in (home / "telemetry" / "egress.jsonl").read_text()


def test_shown_url_hides_every_userinfo_and_keeps_the_rest() -> None:
    line = "from postgres://u:pw@h:5432/db to https://tok@git.example/r?x=1 and http://h/p@q"
    assert shown_url(line) == (
        "from postgres://[REDACTED:url-userinfo]@h:5432/db to "
        "https://[REDACTED:url-userinfo]@git.example/r?x=1 and http://h/p@q"
    )
