"""Running tether as a user does, in child processes: one-shot commands and the daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tether.config import load_config
from tether.daemon.api import DaemonClient
from tether.daemon.compose import Runtime, build_runtime, build_scheduler
from tether.home import init_home
from tether.scheduler import Scheduler, load_jobs
from tether.testing.clock import StepClock

#: What steers a child tether (its home, crash and pause points, its clock): a test sets
#: the ones it means through ``env``; none leak in from the environment pytest runs in.
STEERING = frozenset(
    {"TETHER_HOME", "TETHER_CRASH_AT", "TETHER_PAUSE_AT", "TETHER_PAUSE_DIR", "TETHER_TEST_NOW"}
)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment minus anything that would steer a child, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in STEERING}
    env.update(extra or {})
    return env


def tether_argv(home: Path | None, *args: str, clocked: bool = False) -> list[str]:
    """``tether [--home HOME] ARGS`` run by this interpreter; ``clocked``: through
    ``tether.testing.cli``, at the time the child's ``TETHER_TEST_NOW`` names."""
    head = [sys.executable, "-m", "tether.testing.cli" if clocked else "tether.cli.main"]
    return [*head, "--home", str(home), *args] if home is not None else [*head, *args]


def _clocked(env: dict[str, str] | None) -> bool:
    """A child given ``TETHER_TEST_NOW`` runs at that time (``tether.testing.cli``)."""
    return bool(env and env.get("TETHER_TEST_NOW"))


def tether(
    home: Path | None,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """One command, run to the end: its exit code and both outputs."""
    return subprocess.run(
        tether_argv(home, *args, clocked=_clocked(env)),
        input=input,
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
        check=False,
    )


def spawn(
    home: Path | None, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """One command started in the background, its outputs piped."""
    return subprocess.Popen(
        tether_argv(home, *args, clocked=_clocked(env)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(env),
    )


@contextmanager
def daemon_home(llm_url: str) -> Iterator[Path]:
    """A fresh home whose [llm] is ``llm_url``, at a short path: AF_UNIX socket paths are
    short, so it lives near the root rather than under pytest's tmp_path."""
    with tempfile.TemporaryDirectory(prefix="th", dir="/tmp") as tmp:
        home = Path(tmp)
        init_home(home)
        (home / "tether.toml").write_text(f'[llm]\nurl = "{llm_url}"\ntimeout_s = 10\n')
        yield home


class Daemon:
    """`tether serve` in a child process, started once it answers on its socket."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.proc = spawn(home, "serve", env=env)
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


class ScheduledRuntime:
    """The daemon's runtime and scheduler on ``home`` as its tether.toml stands, in this
    process and without the socket, on a clock the test moves."""

    def __init__(self, home: Path, clock: StepClock) -> None:
        self.runtime: Runtime = build_runtime(home, load_config(home), clock=clock)
        self.scheduler: Scheduler = build_scheduler(self.runtime, load_jobs(home))
        self.scheduler.recover()

    async def close(self) -> None:
        await self.scheduler.stop(grace_s=10)
        await self.runtime.aclose()
