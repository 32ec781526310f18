"""Reads of what the user names are bounded while they happen (issue 34, item 5): a
device that never ends (/dev/zero), a line or a body past its limit, on a file or on
standard input, is refused with one line naming it and the limit (exit 2), not read
whole. Real child processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from daemon_helpers import child_env, tether, tether_argv


def _fed(home: Path, stdin: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with stdin.open("rb") as source:
        return subprocess.run(
            tether_argv(home, *args),
            stdin=source,
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=60,
            check=False,
        )


@pytest.mark.parametrize(
    ("args", "limit"),
    [
        (("sessions", "import", "/dev/zero"), "64 MiB"),
        (("sessions", "import", "--format", "claude-code", "/dev/zero"), "a device"),
        (("transcripts", "ingest", "/dev/zero"), "a device"),
        (("page", "write", "notes/x", "--file", "/dev/zero"), "1 MiB"),
    ],
)
def test_dev_zero_named_as_a_file_is_refused_with_the_limit(
    home: Path, args: tuple[str, ...], limit: str
) -> None:
    done = tether(home, *args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("tether: error: /dev/zero: ")
    assert limit in line


@pytest.mark.parametrize(
    ("args", "limit"),
    [(("sessions", "import", "-"), "64 MiB"), (("page", "write", "notes/x"), "1 MiB")],
)
def test_dev_zero_on_stdin_is_refused_with_the_limit(
    home: Path, args: tuple[str, ...], limit: str
) -> None:
    done = _fed(home, Path("/dev/zero"), *args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("tether: error: <stdin>: ")
    assert limit in line
    assert list((home / "imports").glob("stdin-*")) == []  # the spool is gone


def test_a_page_body_just_past_the_limit_is_refused_and_nothing_is_stored(
    home: Path, tmp_path: Path
) -> None:
    big = tmp_path / "big.md"
    big.write_bytes(b"# Big\n" + b"x" * (1024 * 1024))
    done = tether(home, "page", "write", "notes/big", "--file", str(big))
    assert done.returncode == 2
    assert f"{big}: larger than 1 MiB" in done.stderr
    assert tether(home, "page", "list").stdout == "no pages\n"
