"""A home with something private and something world-visible of every kind, and
``tether mcp`` over both transports as a real child process, driven by the SDK's own
client."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from datetime import UTC, date, datetime
from pathlib import Path

import httpx2
import msgspec
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import clean
from sweep_helpers import DictProducer, day_packet, fact, utc
from tether.config import SweepConfig
from tether.imports.jsonl import import_jsonl
from tether.memory.pages import write_page
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners
from tether.sweep.runner import Runner, members

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
D0 = date(2026, 10, 31)
#: The whole CLI as a child process: `python -m tether.cli.main --home H ...`.
TETHER = [sys.executable, "-m", "tether.cli.main"]


def build_home(home: Path) -> dict[str, str]:
    """An imported conversation, a world page and a private one, a world fact and a
    private one (through the real sweep), all about Hydra; the refs of each."""
    src = home.parent / "in.jsonl"
    lines = [
        {"session": "trip", "role": "user", "text": "We booked the ferry to Hydra"},
        {"session": "trip", "role": "assistant", "text": "Noted: the Hydra ferry."},
    ]
    src.write_text("".join(json.dumps({**x, "time": "2024-03-02T10:00:00Z"}) + "\n" for x in lines))
    import_jsonl(home, src, now=NOW, store=lambda: closing(SqliteStore(home / "tether.db")))
    store = SqliteStore(home / "tether.db")
    for slug, body, visibility in (
        ("people/ada", "Ada sails to Hydra every summer", "world"),
        ("people/bob", "Bob hides a villa on Hydra", "private"),
    ):
        write_page(
            store,
            slug,
            clean(body),
            title=None,
            tags=(),
            visibility=visibility,  # type: ignore[arg-type]
            untrusted=False,
            who="owner",
            session=None,
            time=NOW,
        )
    store.close()
    sweep = SqliteSweepStore(home / "tether.db")
    owner = owners.add(sweep, "alice", "Europe/Paris", utc("2026-11-01T08:00:00+00:00"))
    world = msgspec.structs.replace(
        fact("rowing", "direct_user_statement", "The owner rows across Hydra harbour"),
        visibility="world",
    )
    private = fact("diary", "direct_user_statement", "The owner keeps a Hydra diary")
    runner = Runner(
        sweep,
        DictProducer({D0: day_packet(owner, D0, (world, private))}),
        config=SweepConfig(enabled=True),
        cohort=members(["*"]),
        claimant="test-1",
    )
    runner.run(utc("2026-11-01T12:00:00+00:00"))
    with sweep.transaction(write=False) as tx:
        ids = {f.entity: f.id for f in tx.facts("alice")}
    sweep.close()
    return {
        "turn": "turn:trip:1",
        "world_page": "page:people/ada",
        "private_page": "page:people/bob",
        "world_fact": f"fact:{ids['rowing']}",
        "private_fact": f"fact:{ids['diary']}",
    }


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TETHER, "--home", str(home), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def create_token(home: Path) -> tuple[str, str]:
    out = cli(home, "mcp", "token", "create", "--json", "--name", "test")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    return made["token"], made["id"]


@contextlib.asynccontextmanager
async def stdio_session(home: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session on `tether mcp` as a child process."""
    # The SDK passes the child only a few variables: PYTHONPATH too, so the server runs
    # the code under test (a checkout's src/), not whatever the interpreter has installed.
    # The pause points' variables too (``tether.faults``), for a test that holds it.
    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH" or k.startswith("TETHER_PAUSE")}
    params = StdioServerParameters(
        command=TETHER[0],
        args=[*TETHER[1:], "--home", str(home), "mcp", *extra],
        env={**get_default_environment(), **env},
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


@contextlib.contextmanager
def http_server(home: Path) -> Iterator[str]:
    """`tether mcp --http --port 0` as a child process; its URL once it listens."""
    proc = subprocess.Popen(
        [*TETHER, "--home", str(home), "mcp", "--http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while "serving http://" not in line:
            ready, _, _ = select.select(
                [proc.stderr], [], [], max(0.0, deadline - time.monotonic())
            )
            assert ready, "tether mcp --http did not start"
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "tether mcp --http exited"
        yield line.split("serving ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        yield s


async def call(s: ClientSession, tool: str, **args: object) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await s.call_tool(tool, args)
    text = "".join(getattr(c, "text", "") for c in result.content)
    return bool(result.is_error), text


async def hit_ids(s: ClientSession, query: str, **args: object) -> list[str]:
    error, text = await call(s, "recall", query=query, **args)
    assert not error, text
    return [h["id"] for h in json.loads(text)["hits"]]
