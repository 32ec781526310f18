"""The MCP server and the daemon's socket give nothing away (issue 34, item 8): an
argument that fails validation is named, never echoed (pydantic quotes a value's start
and end: half a pasted key); a token's name is screened for secrets; the daemon's socket
is the owner's alone; a lax home (0755 folders, 0644 files) is made private by chat and
serve as by init. The SDK's own client, tether in child processes."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from daemon_helpers import Daemon, daemon_home, tether
from mcp_helpers import call, stdio_session
from tether.testing.fake_llama import FakeLlama, Reply

KEY = "sk-ant-api03-" + "Zx9_Qw8-Er7t" * 8 + "AA"


@pytest.mark.anyio
async def test_a_rejected_argument_is_named_but_never_echoed(home: Path) -> None:
    async with stdio_session(home) as s:
        too_long = KEY + " " + "x" * 20_000 + " " + KEY
        for tool, args in [
            ("remember", {"text": too_long}),
            ("recall", {"query": KEY, "k": KEY}),
            ("recall", {"query": too_long}),
            ("read", {"link": too_long}),
            ("recall", {"query": "tea", "level": KEY}),
        ]:
            error, text = await call(s, tool, **args)
            assert error
            assert "bad arguments" in text
            assert KEY[:12] not in text
            assert KEY[-6:] not in text
            assert "xxxx" not in text
            assert "input_value" not in text


@pytest.mark.parametrize(
    ("name", "secret"),
    [("bot " + "AKIA" + "Q3EGRDLRT5NDWX7P", "T5NDWX7P"), ("db postgres://u:Pw9z@h/d", "Pw9z")],
)
def test_a_token_name_holding_a_secret_is_refused(home: Path, name: str, secret: str) -> None:
    done = tether(home, "mcp", "token", "create", "--name", name)
    assert done.returncode == 2
    assert "the token name holds a secret" in done.stderr
    assert secret not in done.stderr + done.stdout
    assert tether(home, "mcp", "token", "list", "--json").stdout.strip() == "[]"
    assert not any(secret.encode() in p.read_bytes() for p in home.rglob("*") if p.is_file())


def _modes(home: Path) -> set[int]:
    paths = [home, *home.rglob("*")]
    return {stat.S_IMODE(p.lstat().st_mode) & 0o077 for p in paths if not p.is_symlink()}


def _loosen(home: Path) -> None:
    for p in [home, *home.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_the_daemon_socket_is_the_owners_alone(fake: FakeLlama) -> None:
    with daemon_home(fake.url) as home:
        _loosen(home)
        daemon = Daemon(home)
        try:
            sock = home / "run" / "tether.sock"
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600
            assert stat.S_IMODE((home / "run").stat().st_mode) == 0o700
            assert _modes(home) == {0}  # serve made the lax home private
            if os.geteuid() == 0:
                # Proof by trying: another user cannot connect.
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the child
                    code = 0
                    try:
                        os.setgid(65534)
                        os.setuid(65534)
                        with socket.socket(socket.AF_UNIX) as s:
                            s.connect(str(sock))
                    except PermissionError:
                        code = 13
                    except BaseException:
                        code = 1
                    os._exit(code)
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 13
        finally:
            code, err = daemon.stop()
        assert code == 0, err


def test_chat_makes_a_lax_home_private(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    _loosen(home)
    assert _modes(home) != {0}
    fake.script(Reply(content="hello"))
    done = tether(home, "chat", "hi")
    assert done.returncode == 0, done.stderr
    assert "private (folders 0700, files 0600)" in done.stderr
    assert _modes(home) == {0}
    fake.script(Reply(content="again"))
    quiet = tether(home, "chat", "hi")  # a private home: nothing to say
    assert quiet.stderr == ""
