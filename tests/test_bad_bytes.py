"""Bad input from the command line is one line and exit 2, never a traceback (issue 34,
item 6): bytes that are not UTF-8 in an argument or on standard input, a --home that
names a file, a port in use or a host that is no address here, a scan file that is not
UTF-8. Real child processes, raw bytes."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import child_env, tether, tether_argv
from tether.testing.fake_llama import FakeLlama, Reply

BAD = b"the key is \xff\xfe here"


def _raw(home: Path, *args: bytes, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    head = [a.encode() for a in tether_argv(home)]
    return subprocess.run(
        [*head, *args], input=stdin, capture_output=True, env=child_env(), timeout=60, check=False
    )


def _one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 2, done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("tether: error: ")
    return line


@pytest.mark.parametrize(
    "args",
    [
        (b"memory", b"add", BAD),
        (b"memory", b"note", BAD),
        (b"chat", BAD),
        (b"page", b"write", b"notes/x", b"--title", BAD),
        (b"memory", b"recall", BAD),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused(home: Path, args: tuple[bytes, ...]) -> None:
    line = _one_line(_raw(home, *args))
    assert "is not UTF-8 text" in line
    assert "\\x" not in line  # the bytes are not echoed


def test_stdin_that_is_not_utf8_is_refused(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    page = _raw(home, b"page", b"write", b"notes/x", stdin=b"# X\n\n" + BAD)
    assert "<stdin>: not UTF-8 text" in _one_line(page)
    fake.script(Reply(content="hello to you"))
    chat = _raw(home, b"chat", stdin=b"hello\n" + BAD + b"\n")
    assert chat.returncode == 2
    assert chat.stdout.decode().strip() == "hello to you"  # the good line had its turn
    assert "<stdin>: line 2 is not UTF-8 text" in chat.stderr.decode()
    assert "Traceback" not in chat.stderr.decode()


def test_a_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    for args in (("init",), ("chat", "hi"), ("memory", "show"), ("serve",)):
        done = tether(file, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert (
            done.stderr == f"tether: error: {file}: not a folder (the home is named by "
            "--home, else TETHER_HOME, else ~/.tether)\n"
        )
    assert file.read_text() == "x"


def test_a_scan_allow_file_that_is_not_utf8_names_the_line(home: Path) -> None:
    (home / ".tether-scan-allow").write_bytes(b"# reviewed\n\xff\xfe\n")
    for args in ((b"memory", b"scan"), (b"memory", b"add", b"the owner likes tea")):
        line = _one_line(_raw(home, *args))
        assert line.endswith(".tether-scan-allow:2: not UTF-8 text")


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something already listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_a_port_in_use_or_a_bad_host_is_refused(home: Path, taken: int) -> None:
    for args in (
        ("fake-llm", "--port", str(taken)),
        ("mcp", "--http", "--port", str(taken)),
        ("fake-llm", "--host", "no-such-host.invalid", "--port", "0"),
        ("mcp", "--http", "--host", "no-such-host.invalid", "--port", "0"),
        ("mcp", "--http", "--host", "192.0.2.1", "--port", "0"),  # no address of this machine
    ):
        done = tether(home, *args, timeout=30)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.splitlines()[-1].startswith("tether: error: cannot listen on ")
