"""Shared fixtures: real files in a temporary home, times passed in explicitly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import pg_helpers
from daemon_helpers import daemon_home
from tether.config import load_config
from tether.daemon.compose import Runtime, build_runtime
from tether.home import init_home
from tether.ports import Store
from tether.scan.screen import Screened, screen
from tether.stores.sqlite import SqliteStore
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama


class Ticker:
    """Hands out strictly increasing UTC times, so tests never read the wall clock."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def tick() -> Ticker:
    return Ticker()


#: What a test home's tether.toml ends with unless the test is marked ``vectors``: the
#: suite's recall tests were written for lexical recall (their exact hit sets), which is
#: what they ran before the commands embedded what they add, and loading the model and
#: embedding in every test home would cost minutes of the suite ("finds nothing" holds
#: with vectors too: ``test_vectors_on``); the tests marked ``vectors`` (and
#: ``test_vectors_absent``, which removes it) run "auto".
LEXICAL_PIN = "\n[recall]\nvectors = false\n"


@pytest.fixture
def home(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    path = tmp_path / "home"
    init_home(path)
    if request.node.get_closest_marker("vectors") is None:
        with (path / "tether.toml").open("a") as f:
            f.write(LEXICAL_PIN)
    return path


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    """A fake llama-server with two slots (a module needing another size defines its own)."""
    with FakeLlama(n_ctx=16384, parallel=2) as f:
        yield f


@pytest.fixture
async def rt(home: Path, fake: FakeLlama) -> AsyncIterator[Runtime]:
    """The runtime ``tether serve`` composes, over ``home`` and ``fake``."""
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    r = build_runtime(home, load_config(home), clock=StepClock())
    yield r
    await r.aclose()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the daemon's event loop."""
    return "asyncio"


def clean(text: str) -> Screened:
    """``text`` screened as the owner's command line screens it (a secret is refused)."""
    return screen(text, what="test text", allow=frozenset(), on_secret="refuse")


@pytest.fixture
def short_home(fake: FakeLlama) -> Iterator[Path]:
    """A home whose path is short enough for the daemon's Unix socket (108 bytes), on the
    module's ``fake`` server."""
    with daemon_home(fake.url) as home:
        yield home


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """This run's own PostgreSQL database (skips the test where no server is set)."""
    if pg_helpers.server() is None:
        pytest.skip(f"{pg_helpers.ENV} is not set (no PostgreSQL)")
    with pg_helpers.fresh_database() as url:
        yield url


@pytest.fixture(params=pg_helpers.BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres``: a contract test runs once per backend."""
    return str(request.param)


@pytest.fixture
def any_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    """A fresh main store on ``backend`` (PostgreSQL: a new owner's schema)."""
    if backend == "sqlite":
        s: Store = SqliteStore(tmp_path / "tether.db")
    else:
        from tether.stores.postgres import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"), pg_helpers.new_owner())
    yield s
    s.close()
