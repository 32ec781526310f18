"""``tether chat`` with the embedded backend and no daemon says once, per home, why its
turns start cold and what keeps them warm (issue 17, item 10)."""

from __future__ import annotations

from pathlib import Path

from daemon_helpers import tether
from tether.testing import FakeLlama


def test_the_note_is_said_once_per_home(home: Path) -> None:
    toml = home / "tether.toml"
    toml.write_text('[llm]\nbackend = "embedded"\n')
    first = tether(home, "chat", "hi", timeout=300)
    assert "every turn starts cold" in first.stderr
    assert "run `tether serve`" in first.stderr
    second = tether(home, "chat", "hi again", timeout=300)
    assert "starts cold" not in second.stderr
    assert first.returncode == second.returncode  # 0 with the extra, 2 (its hint) without


def test_a_server_backend_says_nothing(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    out = tether(home, "chat", "hi")
    assert out.returncode == 0
    assert "starts cold" not in out.stderr
