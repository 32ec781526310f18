"""One `tether serve` per home, as a user starts them: real child processes started in
the same instant, the fake llama server over HTTP. Exactly one serves; the other exits 2
naming the winner's pid and never touches the winner's socket."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from daemon_helpers import Daemon, spawn
from tether.daemon.api import DaemonClient, socket_path

pytestmark = pytest.mark.slow

ROUNDS = 4


def _health_pid(home: Path) -> int | None:
    client = DaemonClient(home, timeout_s=5)
    try:
        if not client.alive():
            return None
        return int(json.loads(client._client.get("/v1/health").content)["pid"])
    finally:
        client.close()


def _wait(procs: list[subprocess.Popen[str]], home: Path) -> int:
    """Until one process answers on the socket and the rest have exited; its pid."""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        pid = _health_pid(home)
        if pid is not None and sum(p.poll() is None for p in procs) == 1:
            return pid
        if all(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    raise AssertionError(
        "not exactly one daemon: " + "; ".join(f"{p.pid} rc={p.poll()}" for p in procs)
    )


def test_two_serves_started_at_once_leave_exactly_one(short_home: Path) -> None:
    # A heartbeat every second: scheduled work a second daemon would run again.
    with (short_home / "tether.toml").open("a") as f:
        f.write("[heartbeat]\nevery_s = 1\n")
    for _ in range(ROUNDS):
        procs = [spawn(short_home, "serve"), spawn(short_home, "serve")]
        try:
            winner_pid = _wait(procs, short_home)
            (winner,) = [p for p in procs if p.pid == winner_pid]
            (loser,) = [p for p in procs if p is not winner]
            _, err = loser.communicate(timeout=10)
            assert loser.returncode == 2, err
            assert f"already serving {short_home} (pid {winner_pid}," in err
            assert err.count("\n") == 1, err  # one line, no traceback
            assert "serving home=" not in err  # it started nothing: no store, no scheduler
            # The winner still answers on its socket once the loser is gone.
            assert socket_path(short_home).exists()
            assert _health_pid(short_home) == winner_pid
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            outs = [p.communicate(timeout=30) for p in procs]
        assert winner.returncode == 0, outs
        assert not socket_path(short_home).exists()  # the winner removed its own socket


def test_a_stopping_daemon_leaves_a_socket_it_did_not_bind(short_home: Path) -> None:
    daemon = Daemon(short_home)
    path = socket_path(short_home)
    # Someone moved the daemon's socket aside and bound another at its path.
    os.rename(path, path.with_name("moved.sock"))
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        other.bind(str(path))
        other.listen(1)
        code, err = daemon.stop()
        assert code == 0, err
        assert path.exists(), "the daemon removed a socket it did not bind"
    finally:
        other.close()


def test_a_killed_daemon_leaves_no_lock_behind(short_home: Path) -> None:
    first = Daemon(short_home)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.communicate(timeout=10)
    second = Daemon(short_home)  # the kernel released the lock with the process
    code, err = second.stop()
    assert code == 0, err
