"""Running tether as a user does, in child processes: one-shot commands and the daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tether.daemon.api import DaemonClient


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment minus anything that would steer a child (home, crash points)."""
    env = {k: v for k, v in os.environ.items() if k not in {"TETHER_HOME", "TETHER_CRASH_AT"}}
    env.update(extra or {})
    return env


def tether(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.main", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
        check=False,
    )


class Daemon:
    """`tether serve` in a child process, started once it answers on its socket."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tether.cli.main", "--home", str(home), "serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(env),
        )
        # Wait until this daemon answers: a socket file left by a killed one may exist.
        client = DaemonClient(home, timeout_s=5)
        deadline = time.monotonic() + 20
        try:
            while not client.alive():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    _, err = self.proc.communicate(timeout=5)
                    raise AssertionError(f"daemon did not start: {err}")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err
