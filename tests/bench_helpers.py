"""Load a script of ``benchmarks/`` as a module, for the tests that check its protocol."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported under ``name``; the checkout's root goes on
    ``sys.path`` first, as ``python -m benchmarks.<name>`` has it, so a script importing a
    sibling (``from benchmarks.embed_cache import ...``) loads."""
    root = str(BENCHMARKS.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
