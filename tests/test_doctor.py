"""``tether doctor`` against the fake llama server (a real HTTP server) and no server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from daemon_helpers import tether
from tether.testing.fake_llama import FakeLlama


def _doctor(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tether(home, "doctor", *args)


def test_a_llama_server_with_two_slots_is_usable(home: Path) -> None:
    with FakeLlama(n_ctx=8192, parallel=2) as fake:
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n')
        out = _doctor(home, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is True
    assert report["backend"] == "llama"
    assert report["slots"] == {"main": 0, "background": 1}
    assert report["n_ctx"] == {"main": 8192, "background": 8192}


def test_a_missing_background_slot_is_unusable(home: Path) -> None:
    with FakeLlama(n_ctx=8192, parallel=1) as fake:
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n')
        out = _doctor(home)
    assert out.returncode == 1
    assert "FAIL slot background" in out.stdout
    assert "-np 2" in out.stdout


def test_a_slot_smaller_than_expected_is_unusable(home: Path) -> None:
    with FakeLlama(n_ctx=4096, parallel=2) as fake:
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n')
        out = _doctor(home)
    assert out.returncode == 1
    assert "n_ctx 4096 < [expect] n_ctx 8192" in out.stdout


def test_no_server_is_unusable(home: Path) -> None:
    (home / "tether.toml").write_text('[llm]\nurl = "http://127.0.0.1:9"\ntimeout_s = 2\n')
    out = _doctor(home)
    assert out.returncode == 1
    assert "NOT usable" in out.stdout


def test_a_bad_config_exits_2(home: Path) -> None:
    (home / "tether.toml").write_text("[llm]\nbakend = 1\n")
    out = _doctor(home)
    assert out.returncode == 2
    assert "llm.bakend" in out.stderr
