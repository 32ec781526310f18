"""The attack run's cases that are not a fetched page (issue 34, items 3 to 8): bad input
on the command line and on stdin, devices and links in and around the home, secrets in
tags, token names, URLs and MCP arguments. Each case runs ``tether`` as a user does (a
child process, raw bytes where it matters) or the real server class in process, and is
*held* when tether refused cleanly (the exit code asked for, one line of error, no
traceback) and the check of what it must not have done passes.

``benchmarks/injection_corpus.py`` runs these after the fetched-page cases and prints one
JSON line per case and the totals; ``tests/test_injection_corpus.py`` asserts each one.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tether.config import load_config
from tether.home import init_home
from tether.records import Page
from tether.scan import scan
from tether.stores.sqlite import SqliteStore
from tether.testing.fake_llama import FakeLlama, Reply
from tether.tools.egress import Egress

AWS = "AKIA" + "Q3EGRDLRT5NDWX7P"
PASSWORD = "Pw9zq" + "Lx"
BAD = b"the key is \xff\xfe here"
T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
ELSEWHERE = "- another program's file, not the agent's identity\n"


@dataclass
class Ran:
    """What one command did."""

    code: int
    out: str
    err: str


@dataclass
class Probe:
    """One case: ``run`` does it in a fresh ``home`` (``tmp`` beside it) and returns what
    ran, or None for an in-process case; ``check`` lists what went wrong (empty: held)."""

    name: str
    kind: str
    item: int  # the item
    run: Callable[[Path, Path, FakeLlama], Ran | list[str]]
    code: int = 2  # the exit code a clean refusal has


@dataclass
class Held:
    name: str
    kind: str
    held: bool
    problems: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {"case": self.name, "kind": self.kind, "held": self.held, "problems": self.problems}


def _env() -> dict[str, str]:
    steering = {"TETHER_HOME", "TETHER_CRASH_AT", "TETHER_PAUSE_AT", "TETHER_TEST_NOW"}
    return {k: v for k, v in os.environ.items() if k not in steering}


def tether(home: Path, *args: str | bytes, stdin: bytes | Path = b"", timeout: float = 60) -> Ran:
    """``tether --home HOME ARGS`` in a child process, arguments as raw bytes."""
    argv = [os.fsencode(a) for a in (sys.executable, "-m", "tether.cli.main", "--home", home)]
    argv += [a if isinstance(a, bytes) else a.encode() for a in args]
    feed: dict[str, Any] = {"input": stdin} if isinstance(stdin, bytes) else {}
    opened = None
    if isinstance(stdin, Path):
        opened = stdin.open("rb")
        feed = {"stdin": opened}
    try:
        done = subprocess.run(
            argv, capture_output=True, env=_env(), timeout=timeout, check=False, **feed
        )
    finally:
        if opened is not None:
            opened.close()
    return Ran(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode())


def _llm(home: Path, fake: FakeLlama, url: str = "") -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{url or fake.url}"\ntimeout_s = 5\n')


def _holding(home: Path, secret: str) -> list[str]:
    return [
        f"{p.name} holds the secret"
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()
    ]


# -- item 3: page tags ------------------------------------------------------------------


def _tag_refused(home: Path, _tmp: Path, _f: FakeLlama) -> Ran:
    return tether(home, "page", "write", "ops/db", "--tag", f"key {AWS}", stdin=b"# DB\n\nnotes")


def _tag_redacted(home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    done = tether(
        home, "page", "write", "ops/db", "--tag", f"key {AWS}", "--redact", stdin=b"# DB\n\nx"
    )
    shown = tether(home, "page", "show", "ops/db", "--json")
    problems = [] if done.code == 0 else [f"exit {done.code}: {done.err}"]
    if shown.code != 0 or json.loads(shown.out)["tags"] != ["key [REDACTED:aws-access-key]"]:
        problems.append(f"tags shown as {shown.out!r}")
    return problems + _holding(home, AWS)


def _tag_scanned(home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    with SqliteStore(home / "tether.db") as st:  # a page written before tags were screened
        st.put_page(Page("ops/db", "DB", "# DB\n\nx", ("ops", AWS), "private", False, T0))
    found = tether(home, "memory", "scan")
    if found.code != 1 or "page ops/db (tags)" not in found.out:
        return [f"memory scan said {found.code}: {found.out!r}"]
    tether(home, "memory", "scan", "--redact")
    return _holding(home, AWS)


# -- item 4: passwords --------------------------------------------------------------------


def _passwords_found(_home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    problems = []
    for text in (
        f"postgres://u:{PASSWORD}@h/db",
        f"password = {PASSWORD}",
        f"pw: {PASSWORD}\n",
        f"passwd: {PASSWORD}\n",
        f"pwd={PASSWORD}&x=1",
    ):
        if not scan(text):
            problems.append(f"no finding in {text!r}")
    return problems


def _userinfo_llm(home: Path, _tmp: Path, fake: FakeLlama) -> list[str]:
    _llm(home, fake, f"http://sam:{PASSWORD}@127.0.0.1:1")
    chat, doctor = tether(home, "chat", "hi"), tether(home, "doctor")
    problems = [f"exit {chat.code}"] if chat.code != 1 else []
    for what, ran in (("chat", chat), ("doctor", doctor)):
        if PASSWORD in ran.out + ran.err:
            problems.append(f"{what} printed the password")
    return problems


def _userinfo_session_show(home: Path, _tmp: Path, _f: FakeLlama) -> Ran:
    return tether(home, "session", "show", f"postgres://u:{PASSWORD}@h/db")


def _userinfo_egress_log(home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    import logging

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep()
    logging.getLogger("tether.egress").addHandler(handler)
    try:
        asyncio.run(_fetch(home, f"http://sam:{PASSWORD}@10.0.0.1/"))
    finally:
        logging.getLogger("tether.egress").removeHandler(handler)
    if not lines:
        return ["no log line"]
    return ["the egress log holds the password"] if any(PASSWORD in x for x in lines) else []


async def _fetch(home: Path, url: str) -> object:
    async with httpx.AsyncClient() as http:
        egress = Egress(http, load_config(home).tools, home=home)
        return await egress.fetch(
            url, session="chat", tainted=False, owner_urls=frozenset(), time=T0
        )


# -- item 5: unbounded reads --------------------------------------------------------------


def _named(*args: str) -> Callable[[Path, Path, FakeLlama], Ran]:
    return lambda home, _tmp, _f: tether(home, *args)


def _fed(stdin: Path | bytes, *args: str | bytes) -> Callable[[Path, Path, FakeLlama], Ran]:
    return lambda home, _tmp, _f: tether(home, *args, stdin=stdin)


# -- item 6: tracebacks -----------------------------------------------------------------


def _home_is_file(_home: Path, tmp: Path, _f: FakeLlama) -> Ran:
    file = tmp / "a-file"
    file.write_text("x")
    return tether(file, "init")


def _port_taken(*args: str) -> Callable[[Path, Path, FakeLlama], Ran]:
    def run(home: Path, _tmp: Path, _f: FakeLlama) -> Ran:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen(1)
            return tether(home, *args, "--port", str(sock.getsockname()[1]), timeout=30)

    return run


def _allow_not_utf8(home: Path, _tmp: Path, _f: FakeLlama) -> Ran:
    (home / ".tether-scan-allow").write_bytes(b"# reviewed\n\xff\xfe\n")
    return tether(home, "memory", "add", "the owner likes tea")


def _chat_stdin(home: Path, _tmp: Path, fake: FakeLlama) -> Ran:
    _llm(home, fake)
    fake.script(Reply(content="hello"))
    return tether(home, "chat", stdin=b"hello\n" + BAD + b"\n")


# -- item 7: links in the home ------------------------------------------------------------


def _linked_memory(home: Path, tmp: Path, fake: FakeLlama) -> list[str]:
    _llm(home, fake)
    other = tmp / "other.md"
    other.write_text(ELSEWHERE)
    memory = home / "memory" / "memory.md"
    memory.unlink()
    memory.symlink_to(other)
    fake.script(Reply(content="hi"))
    problems = []
    for args in (("memory", "show"), ("chat", "who are you?")):
        ran = tether(home, *args)
        if ran.code != 2 or "a symbolic link" not in ran.err:
            problems.append(f"{args[0]}: exit {ran.code}")
        if "another program" in ran.out:
            problems.append(f"{args[0]} showed the linked file")
    if any("another program" in str(r.body) for r in fake.requests):
        problems.append("the linked file reached the model")
    return problems


def _linked_log(home: Path, tmp: Path, fake: FakeLlama) -> list[str]:
    _llm(home, fake)
    fake.script(Reply(content="first"))
    tether(home, "chat", "hello")
    log = home / "sessions" / "chat" / "0.jsonl"
    other = tmp / "elsewhere.jsonl"
    other.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(other)
    before = other.read_bytes()
    fake.script(Reply(content="second"))
    ran = tether(home, "chat", "again")
    problems = [] if ran.code == 2 else [f"exit {ran.code}"]
    return problems + (["appended through the link"] if other.read_bytes() != before else [])


def _linked_egress_log(home: Path, tmp: Path, _f: FakeLlama) -> list[str]:
    other = tmp / "elsewhere.txt"
    other.write_text("someone else's\n")
    log = home / "telemetry" / "egress.jsonl"
    log.parent.mkdir(exist_ok=True)
    log.symlink_to(other)
    asyncio.run(_fetch(home, "http://10.0.0.1/"))
    return [] if other.read_text() == "someone else's\n" else ["appended through the link"]


def _fifo_memory(home: Path, _tmp: Path, _f: FakeLlama) -> Ran:
    memory = home / "memory" / "memory.md"
    memory.unlink()
    os.mkfifo(memory)
    return tether(home, "memory", "show", timeout=20)


# -- item 8: MCP, tokens, socket, lax home ---------------------------------------------


def _mcp_echo(home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    from tether.mcp.server import TetherMcp
    from tether.mcp.service import Caller, Memory

    key = "sk-ant-api03-" + "Zx9_Qw8-Er7t" * 8 + "AA"

    async def calls() -> list[str]:
        with SqliteStore(home / "tether.db") as store:
            memory = Memory(home, store, None, result_tokens=2000, now=lambda: T0)
            server = TetherMcp(memory, Caller("local", trusted=True))
            texts = []
            for tool, args in (
                ("remember", {"text": key + "x" * 20_000 + key}),
                ("recall", {"query": "tea", "k": key}),
                ("recall", {"query": "tea", "level": key}),
            ):
                try:
                    await server.call_tool(tool, args)
                    texts.append(f"{tool} accepted")
                except Exception as exc:
                    texts.append(str(exc))
            return texts

    return [f"echoed: {t[:80]}" for t in asyncio.run(calls()) if key[:12] in t or key[-6:] in t]


def _token_name(home: Path, _tmp: Path, _f: FakeLlama) -> list[str]:
    ran = tether(home, "mcp", "token", "create", "--name", f"bot {AWS}")
    problems = [] if ran.code == 2 else [f"exit {ran.code}"]
    return problems + _holding(home, AWS)


def _loosen(home: Path) -> None:
    for p in [home, *home.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def _open_paths(home: Path) -> list[str]:
    return [
        f"{p} is open to others"
        for p in [home, *home.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]


def _lax_home_chat(home: Path, _tmp: Path, fake: FakeLlama) -> list[str]:
    _llm(home, fake)
    _loosen(home)
    fake.script(Reply(content="hello"))
    ran = tether(home, "chat", "hi")
    return ([f"exit {ran.code}"] if ran.code else []) + _open_paths(home)


def _socket_mode(home: Path, _tmp: Path, fake: FakeLlama) -> list[str]:
    import time

    _llm(home, fake)
    _loosen(home)
    argv = [sys.executable, "-m", "tether.cli.main", "--home", str(home), "serve"]
    proc = subprocess.Popen(argv, env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    sock = home / "run" / "tether.sock"
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)  # past uvicorn's own chmod
        if not sock.exists():
            return ["the daemon did not start"]
        mode = stat.S_IMODE(sock.stat().st_mode)
        problems = [] if mode == 0o600 else [f"the socket is {mode:o}"]
        return problems + _open_paths(home)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def probes() -> list[Probe]:
    zero = Path("/dev/zero")
    return [
        Probe("tag-secret-refused", "tags", 3, _tag_refused),
        Probe("tag-secret-redacted", "tags", 3, _tag_redacted),
        Probe("tag-secret-scanned", "tags", 3, _tag_scanned),
        Probe("password-forms-detected", "passwords", 4, _passwords_found),
        Probe("userinfo-llm-url", "passwords", 4, _userinfo_llm),
        Probe("userinfo-session-show", "passwords", 4, _userinfo_session_show),
        Probe("userinfo-egress-log", "passwords", 4, _userinfo_egress_log),
        Probe("import-dev-zero", "unbounded", 5, _named("sessions", "import", "/dev/zero")),
        Probe(
            "transcript-dev-zero",
            "unbounded",
            5,
            _named("sessions", "import", "--format", "claude-code", "/dev/zero"),
        ),
        Probe("ingest-dev-zero", "unbounded", 5, _named("transcripts", "ingest", "/dev/zero")),
        Probe(
            "page-file-dev-zero",
            "unbounded",
            5,
            _named("page", "write", "a/b", "--file", "/dev/zero"),
        ),
        Probe("page-stdin-dev-zero", "unbounded", 5, _fed(zero, "page", "write", "a/b")),
        Probe("import-stdin-dev-zero", "unbounded", 5, _fed(zero, "sessions", "import", "-")),
        Probe("argv-memory-add", "traceback", 6, _fed(b"", "memory", "add", BAD)),
        Probe("argv-memory-note", "traceback", 6, _fed(b"", "memory", "note", BAD)),
        Probe("argv-chat", "traceback", 6, _fed(b"", "chat", BAD)),
        Probe("argv-page-write", "traceback", 6, _fed(b"", "page", "write", "a/b", "--title", BAD)),
        Probe("stdin-page-write", "traceback", 6, _fed(b"# X\n\n" + BAD, "page", "write", "a/b")),
        Probe("stdin-chat", "traceback", 6, _chat_stdin),
        Probe("home-is-a-file", "traceback", 6, _home_is_file),
        Probe("fake-llm-port-taken", "traceback", 6, _port_taken("fake-llm")),
        Probe("mcp-port-taken", "traceback", 6, _port_taken("mcp", "--http")),
        Probe(
            "mcp-bad-host",
            "traceback",
            6,
            _named("mcp", "--http", "--host", "no.such.invalid", "--port", "0"),
        ),
        Probe("allow-file-not-utf8", "traceback", 6, _allow_not_utf8),
        Probe("link-memory-md", "links", 7, _linked_memory),
        Probe("link-session-log", "links", 7, _linked_log),
        Probe("link-egress-log", "links", 7, _linked_egress_log),
        Probe("fifo-memory-md", "links", 7, _fifo_memory),
        Probe("mcp-validation-echo", "mcp", 8, _mcp_echo),
        Probe("mcp-token-name-secret", "mcp", 8, _token_name),
        Probe("socket-mode", "mcp", 8, _socket_mode),
        Probe("lax-home-chat", "mcp", 8, _lax_home_chat),
    ]


def run_probe(probe: Probe, root: Path, fake: FakeLlama) -> Held:
    home, tmp = root / probe.name / "home", root / probe.name / "tmp"
    tmp.mkdir(parents=True)
    init_home(home)
    fake.reset()
    try:
        got = probe.run(home, tmp, fake)
    except Exception as exc:  # a crash of the case is a hole, not a stopped run
        return Held(probe.name, probe.kind, False, [f"crashed: {type(exc).__name__}: {exc}"])
    if isinstance(got, list):
        return Held(probe.name, probe.kind, not got, got)
    problems = []
    if got.code != probe.code:
        problems.append(f"exit {got.code}, not {probe.code}")
    if "Traceback" in got.err:
        problems.append("a traceback")
    errors = [line for line in got.err.splitlines() if line.startswith("tether: error: ")]
    if len(errors) != 1:
        problems.append(f"{len(errors)} error lines: {got.err[-300:]!r}")
    for secret in (AWS, PASSWORD, "\\xff"):
        if secret in got.err + got.out:
            problems.append(f"echoed {secret!r}")
    return Held(probe.name, probe.kind, not problems, problems)


def run_all(root: Path, fake: FakeLlama) -> list[Held]:
    return [run_probe(p, root, fake) for p in probes()]
