"""The tree in ``tether.errors``' docstring is the tree of classes: every subclass of
TetherError anywhere in tether is drawn, under its real parent, in its module, with its
exit code (see the docstring's first paragraph for how a line says each)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass

import pytest

import tether
from tether import errors
from tether.errors import TetherError

#: Top-level modules of optional extras (pyproject's optional-dependencies): a tether
#: module that needs one is skipped when it is not installed; any other ImportError fails.
OPTIONAL_EXTRAS = frozenset({"llama_cpp"})

#: A line of the drawing that names a class: the tree's branches, then the name.
_NODE = re.compile(r"^(?P<branch>[ │├└─]*)(?P<name>[A-Z]\w*Error)(?=\s|$)(?P<text>.*)$")
_MODULE = re.compile(r"^\[(?P<module>[a-z_.]+)\]")
_EXIT = re.compile(r"^exit (?P<code>\d+)\b")


@dataclass(frozen=True)
class Drawn:
    name: str
    parent: str | None
    module: str  # where the line says it lives (its own [module], else its parent's)
    exit_code: int | None  # the line's ``exit N``, if it says one


def _drawing() -> list[Drawn]:
    doc = errors.__doc__ or ""
    block = doc.split("::\n", 1)[1]
    lines = [line for line in block.splitlines() if line.strip()]
    lines = lines[: next((i for i, line in enumerate(lines) if line[0] != " "), len(lines))]
    root = _NODE.match(lines[0])
    assert root is not None, lines[0]
    assert root["name"] == "TetherError", lines[0]
    margin = len(root["branch"])
    drawn: list[Drawn] = []
    path: list[Drawn] = []  # the line's ancestors, root first
    for n, line in enumerate(lines):
        node = _NODE.match(line)
        if node is None or (n and not node["branch"].endswith("── ")):
            continue  # a description's next line
        col = len(node["branch"]) - margin
        assert col % 4 == 0, f"{node['name']} is not on a level of the tree: {line!r}"
        depth = col // 4
        assert depth <= len(path), f"{node['name']} hangs under nothing: {line!r}"
        del path[depth:]
        parent = path[-1] if path else None
        text = node["text"].strip()
        module = _MODULE.match(text)
        code = _EXIT.match(text)
        item = Drawn(
            name=node["name"],
            parent=parent.name if parent else None,
            module=f"tether.{module['module']}"
            if module
            else (parent.module if parent else "tether.errors"),
            exit_code=int(code["code"]) if code else None,
        )
        drawn.append(item)
        path.append(item)
    return drawn


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in OPTIONAL_EXTRAS:
            raise


def _import_every_module() -> None:
    # onerror: a package walk_packages could not import, to fail or skip as any module.
    for info in pkgutil.walk_packages(tether.__path__, "tether.", onerror=_import):
        _import(info.name)


def _subclasses(cls: type[TetherError]) -> list[type[TetherError]]:
    out: list[type[TetherError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


@pytest.fixture(scope="module")
def classes() -> dict[str, type[TetherError]]:
    _import_every_module()
    found: dict[str, type[TetherError]] = {"TetherError": TetherError}
    for cls in _subclasses(TetherError):
        if cls.__module__.split(".")[0] != "tether":  # a test's own subclass
            continue
        assert found.get(cls.__name__, cls) is cls, f"two classes named {cls.__name__}"
        found[cls.__name__] = cls
    return found


def test_the_drawing_is_a_tree() -> None:
    names = [d.name for d in _drawing()]
    assert len(names) == len(set(names)), "a class drawn twice"
    assert len(names) > 40


def test_every_error_is_drawn(classes: dict[str, type[TetherError]]) -> None:
    drawn = {d.name for d in _drawing()}
    missing = sorted(f"{c.__module__}.{n}" for n, c in classes.items() if n not in drawn)
    assert not missing, f"not drawn in tether.errors' docstring: {', '.join(missing)}"
    gone = sorted(drawn - classes.keys())
    assert not gone, f"drawn but no such TetherError subclass: {', '.join(gone)}"


def test_every_error_is_drawn_under_its_parent(classes: dict[str, type[TetherError]]) -> None:
    wrong = []
    for d in _drawing():
        cls = classes.get(d.name)
        if cls is None or cls is TetherError:
            continue
        bases = [b.__name__ for b in cls.__bases__]
        if bases != [d.parent]:
            wrong.append(f"{d.name} is drawn under {d.parent} but derives from {bases}")
    assert not wrong, "; ".join(wrong)


def test_every_error_is_drawn_in_its_module(classes: dict[str, type[TetherError]]) -> None:
    wrong = [
        f"{d.name} is drawn in {d.module} but lives in {classes[d.name].__module__}"
        for d in _drawing()
        if d.name in classes and classes[d.name].__module__ != d.module
    ]
    assert not wrong, "; ".join(wrong)


def test_the_drawing_says_each_exit_code(classes: dict[str, type[TetherError]]) -> None:
    by_name = {d.name: d for d in _drawing()}
    wrong = []
    for name, cls in classes.items():
        d = by_name.get(name)
        if d is None:
            continue
        inherited = classes[d.parent].exit_code if d.parent in classes else None
        if d.exit_code is None and cls.exit_code != inherited:
            wrong.append(f"{name} exits {cls.exit_code}, its line says nothing")
        if d.exit_code is not None and d.exit_code != cls.exit_code:
            wrong.append(f"{name} exits {cls.exit_code}, its line says exit {d.exit_code}")
    assert not wrong, "; ".join(wrong)


def test_a_failed_turn_names_its_runbook_once() -> None:
    from tether.agent.compaction import CompactionFailedError
    from tether.agent.outcomes import TurnFailedError

    cause = CompactionFailedError("chat", 3, "the summary call failed")
    said = str(TurnFailedError("chat", "session_full", cause))
    assert said.count("runbook:") == 1
    assert said.endswith("(runbook: session-compact-failed)")
    assert "compaction of session 'chat' failed: the summary call failed" in said
