"""The rules of the house (``docs/architecture.md``, "The rules"), checked on the code.

Each rule is read off ``src/tether`` with ``ast``: every import (module level, inside a
function, under ``TYPE_CHECKING``), every class, every string constant. A rule that fails
names the file, the line and what it broke. The checkers are plain functions over source
text, so the last tests feed them each back door the house once had and check that it is
caught: a rule that cannot fail proves nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tether"
DOCS = Path(__file__).resolve().parents[1] / "docs"

# -- the layers --------------------------------------------------------------------------
#
# A part is a top-level module of the package (``errors``) or a folder (``memory``). Each
# may import its own modules and the parts listed for it here, nothing else: a part that is
# not listed for another sits above it, or beside it, and must be reached through a port or
# from the composition root. Read bottom-up, each line only adds to the lines above it.

VOCABULARY = frozenset({"errors", "faults", "records", "ids"})
FOUNDATION = VOCABULARY | {"config", "files"}
ADAPTER_BASE = FOUNDATION | {"core", "scan", "ports"}
SERVICE_BASE = ADAPTER_BASE | {"sessions", "harnesses"}

ALLOWED: dict[str, frozenset[str]] = {
    # vocabulary and foundation: no I/O of their own but reading a file they are given
    "errors": frozenset(),
    "faults": frozenset(),
    "records": frozenset(),
    "ids": frozenset({"errors"}),
    "config": frozenset({"errors"}),
    "files": frozenset({"errors", "records"}),
    # pure logic: vocabulary only (no fault points, no config, no files)
    "core": frozenset({"errors", "records", "ids"}),
    "scan": frozenset({"errors", "records", "ids", "core"}),
    # every Protocol, over the vocabulary
    "ports": frozenset({"records", "core"}),
    # adapters: I/O and nothing clever; never each other
    "sessions": ADAPTER_BASE,
    "stores": ADAPTER_BASE,
    "llm": ADAPTER_BASE,
    "harnesses": ADAPTER_BASE,
    # the shared fact extractor: one model call over the Llm port, validated by core;
    # used by the sweep and the checkpoint harvest (so it sits below both)
    "extract": ADAPTER_BASE,
    # services over the ports: memory, the sweep, checkpoints, views, taint
    "home": FOUNDATION,
    "broker": ADAPTER_BASE,
    "memory": SERVICE_BASE,
    "checkpoint": SERVICE_BASE | {"extract"},
    "sweep": SERVICE_BASE | {"extract"},
    "views": SERVICE_BASE,
    "tools": SERVICE_BASE | {"memory", "checkpoint", "broker"},
    # use-cases: a turn, an import, scheduled work
    "agent": SERVICE_BASE | {"extract", "memory", "checkpoint", "broker", "tools"},
    "imports": SERVICE_BASE | {"memory", "checkpoint"},
    "scheduler": SERVICE_BASE | {"memory", "checkpoint", "broker", "tools", "agent"},
    # `tether mcp`: the memory over the MCP SDK, its fences and tokens; the store it serves
    # comes from the CLI, so it never opens one itself
    "mcp": SERVICE_BASE | {"memory", "checkpoint"},
    # the one composition root: may build every adapter and service
    "daemon": SERVICE_BASE
    | {"extract"}
    | {"stores", "llm", "home", "broker", "memory", "checkpoint", "sweep", "views", "tools"}
    | {"agent", "imports", "scheduler"},
    # recall over a home (`memory recall`, `memory reindex`): banked windows into their
    # sessions, the index pass, the search, each hit's banked window
    "recall": SERVICE_BASE | {"memory", "checkpoint"},
    # what the model calls cost (`tether usage`, the page's usage view): the logs, the
    # budget ledger, the extraction calls, in the home owner's days
    "usage": SERVICE_BASE | {"extract", "sweep"},
    # `tether doctor`: every check over every part (the backend's probe, the store, the
    # logs, the budget, recall's vectors, the hooks), so it sits above the root
    "doctor": SERVICE_BASE
    | {"extract"}
    | {"stores", "llm", "home", "broker", "memory", "checkpoint", "sweep", "views", "tools"}
    | {"agent", "imports", "scheduler", "daemon"},
    # `tether demo`: a live session of the embedded model through the root's runtime,
    # each step checked; the CLI only draws it
    "demo": SERVICE_BASE | {"llm", "home", "memory", "agent", "scheduler", "daemon"},
    # the memory browser page (`tether ui`): a reader like the CLI's listings, over the
    # same services and the same use-case functions; never the CLI (see `ui_apart`); the
    # CLI starts it and hands it what it may not open (its application's stores and clock)
    "ui": SERVICE_BASE | {"memory", "checkpoint", "sweep", "scheduler", "usage", "recall"},
    # the command line: parse, call, print (sync commands use the store directly)
    "cli": SERVICE_BASE
    | {"extract"}
    | {"stores", "llm", "home", "broker", "memory", "checkpoint", "sweep", "views", "tools"}
    | {"agent", "imports", "scheduler", "daemon", "doctor", "recall", "usage", "ui", "mcp"}
    | {"demo"},
    # public fakes for tests; production never imports them (one exception below)
    "testing": frozenset({"errors", "records", "core"}),
    # the files `tether init` copies (package data; no code)
    "starter": frozenset(),
    "__init__": frozenset(),
}

#: The only production import of ``tether.testing``: ``tether fake-llm`` serves the fake.
TESTING_IMPORTERS = frozenset({"tether.cli.commands_llm"})
#: The one module of ``tether.testing`` that imports the CLI: ``python -m tether.testing.cli``
#: runs ``tether`` at a test's time (an entry point, like a script; nothing imports it).
TESTING_CLI = "tether.testing.cli"

#: Standard-library modules that do I/O or read the clock: ``core/`` imports none of them.
IMPURE = frozenset(
    {
        "asyncio",
        "fcntl",
        "http",
        "io",
        "logging",
        "os",
        "pathlib",
        "random",
        "secrets",
        "shutil",
        "signal",
        "socket",
        "sqlite3",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "uuid",
        "httpx",
    }
)
#: Calls that read the wall clock.
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "time", "monotonic", "perf_counter"})

#: The only files whose SQL may name the sweep's tables (``sweep_owner``, ``sweep_fact`` ...):
#: the sweep store, ``stores/sweep*.py`` (written once for both backends) and each
#: backend's own ``stores/sqlite/sweep*.py`` and ``stores/postgres/sweep*.py``. (The main
#: schemas, ``stores/sqlite/migrations.py`` and ``stores/postgres/schema.py``, are not.)
SWEEP_SQL_PREFIX = ("stores/sweep", "stores/sqlite/sweep", "stores/postgres/sweep")
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|FROM|JOIN|ALTER)\b")
_SWEEP_TABLE = re.compile(r"\bsweep_[a-z_]+\b")

#: The one reader of the wall clock: the application (``App.now``, ``SystemClock``).
CLOCK_ROOT = "daemon/app.py"
#: Where else the wall clock may be read, and why: each compares with a time some other
#: process or the file system wrote by its own wall clock, so a test's stopped clock
#: (``tether.testing.cli``) must not reach it (a crashed run's lease would never run out).
#: ``testing/`` holds the fakes (the fake server stamps replies as llama-server does).
WALL_CLOCK_ALLOWED = {
    CLOCK_ROOT: "the application's clock",
    "sweep/stage.py": "a model-pass mark's lease, judged by other processes' wall clocks",
    "checkpoint/claims.py": "a claim file's age, against its modification time",
    "daemon/serve.py": "stale temporary files, by their modification time",
    "stores/sqlite/health.py": "the telemetry line of a lost WAL, written as the store opens",
}
#: Calls that read the wall clock (the time of day), as (module or class, function).
#: ``time.monotonic`` and ``time.perf_counter`` are not among them: they measure how long
#: something took (a hook's deadline, a lock's wait, a batch's flush), never the time of
#: day, are never stored, and a stopped test clock would make a deadline never pass.
WALL_CLOCK_CALLS = frozenset(
    {
        ("time", "time"),
        ("time", "time_ns"),
        ("datetime", "now"),
        ("datetime", "utcnow"),
        ("datetime", "today"),
        ("date", "today"),
    }
)

#: Composition happens in one place: these are constructed only in ``daemon/compose.py``.
COMPOSED_ONLY_IN_ROOT = frozenset({"Runner"})
ROOT = "daemon/compose.py"


@dataclass(frozen=True)
class Broken:
    file: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}"


def module_name(rel: str) -> str:
    """``memory/recall.py`` -> ``tether.memory.recall``; a package's ``__init__`` is the package."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["tether", *parts])


def part_of(module: str) -> str:
    """The part a module of tether belongs to: its first name below ``tether``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every tether module ``tree`` imports, with its line (``from tether import files``
    imports ``tether.files``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tether."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tether":
                for alias in node.names:
                    yield node.lineno, f"tether.{alias.name}"
            elif node.module.startswith("tether."):
                yield node.lineno, node.module


def layering(rel: str, source: str) -> list[Broken]:
    """The imports of one file that the layers do not allow."""
    me = module_name(rel)
    mine = part_of(me)
    allowed = ALLOWED.get(mine)
    if allowed is None:
        return [Broken(rel, 1, f"part {mine!r} is not in the house's layers (tests/test_house.py)")]
    broken = []
    for line, target in imported(ast.parse(source)):
        theirs = part_of(target)
        if theirs == mine:
            continue
        if theirs == "testing" and me in TESTING_IMPORTERS:
            continue
        if theirs == "cli" and me == TESTING_CLI:
            continue
        if theirs not in allowed:
            broken.append(Broken(rel, line, f"{mine} may not import {theirs} ({target})"))
    return broken


def purity(rel: str, source: str) -> list[Broken]:
    """I/O modules and clock reads in a ``core/`` file."""
    if not rel.startswith("core/"):
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            for name in names:
                if name.split(".")[0] in IMPURE:
                    broken.append(Broken(rel, node.lineno, f"core/ is pure: it imports {name}"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLOCK_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"datetime", "date", "time"}
        ):
            call = f"{node.func.value.id}.{node.func.attr}()"
            broken.append(Broken(rel, node.lineno, f"core/ never reads the clock: {call}"))
    return broken


def protocols(rel: str, source: str) -> list[Broken]:
    """A ``Protocol`` defined anywhere but the ``ports`` package."""
    if rel.startswith("ports/"):
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                if name == "Protocol":
                    broken.append(
                        Broken(rel, node.lineno, f"Protocol {node.name} belongs in ports/")
                    )
    return broken


def sweep_sql(rel: str, source: str) -> list[Broken]:
    """SQL that names a sweep table outside the sweep store."""
    if rel.startswith(SWEEP_SQL_PREFIX):
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if _SQL.search(text) and (table := _SWEEP_TABLE.search(text)):
                rule = f"SQL naming the sweep's table {table.group()} outside the sweep store"
                broken.append(Broken(rel, node.lineno, rule))
    return broken


def composition(rel: str, source: str) -> list[Broken]:
    """A composed object built outside the composition root."""
    if rel == ROOT:
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name in COMPOSED_ONLY_IN_ROOT:
                rule = f"{name} is built only in {ROOT}"
                broken.append(Broken(rel, node.lineno, rule))
    return broken


def _clock_names(tree: ast.AST) -> dict[str, str]:
    """What each name a file imports stands for, of ``time`` and ``datetime``: the module
    ``time``, the classes ``datetime`` and ``date``, the module ``datetime`` (``"module"``),
    or a function itself (``"time.time"``)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in {"time", "datetime"}:
                    kind = "time" if alias.name == "time" else "module"
                    names[alias.asname or alias.name] = kind
        elif isinstance(node, ast.ImportFrom) and node.module in {"time", "datetime"}:
            for alias in node.names:
                key = alias.asname or alias.name
                if node.module == "datetime" and alias.name in {"datetime", "date"}:
                    names[key] = alias.name
                elif node.module == "time" and (node.module, alias.name) in WALL_CLOCK_CALLS:
                    names[key] = f"time.{alias.name}"
    return names


def wall_clock(rel: str, source: str) -> list[Broken]:
    """A read of the wall clock outside the application (and the places allowed above)."""
    if rel in WALL_CLOCK_ALLOWED or rel.startswith("testing/"):
        return []
    tree = ast.parse(source)
    names = _clock_names(tree)
    broken = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, read = node.func, None
        if isinstance(func, ast.Name) and names.get(func.id, "").startswith("time."):
            read = names[func.id]
        elif isinstance(func, ast.Attribute):
            owner = func.value
            kind = None
            if isinstance(owner, ast.Name):
                kind = names.get(owner.id)
            elif (  # datetime.datetime.now(), with the module imported
                isinstance(owner, ast.Attribute)
                and isinstance(owner.value, ast.Name)
                and names.get(owner.value.id) == "module"
            ):
                kind = owner.attr
            if kind is not None and (kind, func.attr) in WALL_CLOCK_CALLS:
                read = f"{kind}.{func.attr}"
        if read is not None:
            rule = f"the wall clock ({read}()) is read only by the application ({CLOCK_ROOT})"
            broken.append(Broken(rel, node.lineno, rule))
    return broken


#: The parts that open a store (or implement one) and so hold the whole ``Store``: the
#: composition root, doctor's checks, the CLI and the memory browser (which open it), the
#: stores and the ports. Every other part is typed on the role ports it uses
#: (``tether.ports.store``).
STORE_HOLDERS = frozenset({"daemon", "doctor", "cli", "ui", "stores", "ports"})


def full_store(rel: str, source: str) -> list[Broken]:
    """A consumer typed on the whole ``Store`` rather than the roles it uses."""
    if part_of(module_name(rel)) in STORE_HOLDERS:
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        named = False
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tether.ports"):
            named = any(alias.name == "Store" for alias in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "Store":
            named = isinstance(node.value, ast.Name) and node.value.id == "ports"
        if named and isinstance(node, ast.ImportFrom | ast.Attribute):
            rule = "typed on the whole Store: name the role ports it uses (tether.ports.store)"
            broken.append(Broken(rel, node.lineno, rule))
    return broken


def ui_apart(rel: str, source: str) -> list[Broken]:
    """The page imports nothing of the command line, nor click: it calls the use-case
    functions the commands call, never a command."""
    if not rel.startswith("ui/"):
        return []
    broken = []
    for line, target in imported(ast.parse(source)):
        if part_of(target) == "cli":
            broken.append(Broken(rel, line, f"ui never imports the CLI ({target})"))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n.split(".")[0] == "click" for n in names):
                broken.append(Broken(rel, node.lineno, "ui never imports click (a command)"))
    return broken


_COMMAND_MODULE = re.compile(r"^cli/commands_[a-z_]+\.py$")


def command_apart(rel: str, source: str) -> list[Broken]:
    """A command module (``cli/commands_*.py``) imports no other: what two commands share
    (parsing, rendering) lives in a CLI module that is no command's, and what they do in a
    feature's use-case function."""
    if not _COMMAND_MODULE.match(rel):
        return []
    me = module_name(rel)
    broken = []
    for line, target in imported(ast.parse(source)):
        if target != me and target.startswith("tether.cli.commands_"):
            rule = f"a command module imports no other ({target})"
            broken.append(Broken(rel, line, rule))
    return broken


def thin_commands(rel: str, source: str) -> list[Broken]:
    """A command module opens no store transaction: what a command reads or writes in one
    (``sweep status``'s counts, ``sweep reconcile``) is a feature's use-case function."""
    if not _COMMAND_MODULE.match(rel):
        return []
    broken = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "transaction"
        ):
            rule = "a command opens no transaction: call a use-case function"
            broken.append(Broken(rel, node.lineno, rule))
    return broken


#: The one-letter parameters whose name is not ours to choose, each with the name that
#: binds it: (file, function, parameter).
NAMED_OUTSIDE = {
    ("cli/commands_recall.py", "recall_cmd", "k"): "click binds it to the option -k",
    ("mcp/server.py", "recall", "k"): "the MCP tool's argument k, in its published schema",
}


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.arg]:
    args = node.args
    rest = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *rest]


def named_parameters(rel: str, source: str) -> list[Broken]:
    """A function's (or a lambda's) parameter named by one letter: a name says what it
    holds (``conn``, ``setting``, ``limit``), read where the parameter is used, far from
    its annotation. ``_`` (unused) is allowed, and ``NAMED_OUTSIDE``."""
    broken = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            name = getattr(node, "name", "<lambda>")
            for arg in _parameters(node):
                if (
                    len(arg.arg) == 1
                    and arg.arg != "_"
                    and (rel, name, arg.arg) not in NAMED_OUTSIDE
                ):
                    rule = f"parameter {arg.arg!r} of {name}: name what it holds"
                    broken.append(Broken(rel, arg.lineno, rule))
    return broken


#: What opens a resource: a store of either backend, a pool of connections, recall's
#: vectors (the index, the embedding model), the chat model. Called only by the
#: application (``daemon/app.py``: each opened once, closed once), by the adapters that
#: implement them (``stores/``, ``llm/``), and by the openers it calls (below).
OPENERS = frozenset(
    {
        "open_store",
        "open_sweep_store",
        "open_snapshot",
        "open_vector_index",
        "open_vectors",
        "open_pool",
        "open_owner_store",
        "open_owner_sweep",
        "build_llm",
        "PgPool",
        "PgStore",
        "PostgresStore",
        "PostgresSweepStore",
        "PostgresVectors",
        "SqliteStore",
        "SqliteSweepStore",
        "SqliteVectors",
    }
)
#: ``embedder.load()``: the embedding model, loaded.
LOADS = frozenset({("embedder", "load")})
APP = "daemon/app.py"
#: Where else, by (file, top-level function or class), and why.
OPENED_ALLOWED = {
    (APP, "App"): "the application",
    ("daemon/vectors.py", "open_vectors"): "the vectors' opener, which App.vectors calls",
}
OPENER_PARTS = ("stores/", "llm/")


def opened_by_app(rel: str, source: str) -> list[Broken]:
    """A store, pool, vectors or model opened outside the application: each would be a
    second open, and a close nobody owns."""
    if rel.startswith(OPENER_PARTS):
        return []
    broken = []
    for top in ast.parse(source).body:
        name = getattr(top, "name", None)
        if (rel, name) in OPENED_ALLOWED:
            continue
        for node in ast.walk(top):
            if not isinstance(node, ast.Call):
                continue
            func, called = node.func, None
            if isinstance(func, ast.Name) and func.id in OPENERS:
                called = func.id
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if func.attr in OPENERS or (owner, func.attr) in LOADS:
                    called = f"{owner}.{func.attr}" if owner else func.attr
            if called is not None:
                rule = f"{called}() opens a resource: ask the application ({APP}) for it"
                broken.append(Broken(rel, node.lineno, rule))
    return broken


CHECKS = (
    layering,
    purity,
    protocols,
    sweep_sql,
    composition,
    full_store,
    ui_apart,
    command_apart,
    thin_commands,
    wall_clock,
    named_parameters,
    opened_by_app,
)


def sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(SRC).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(SRC.rglob("*.py"))
    ]


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_the_code_keeps_the_rules_of_the_house(check: object) -> None:
    assert callable(check)
    broken = [str(b) for rel, source in sources() for b in check(rel, source)]
    assert not broken, "\n".join(broken)


def test_every_part_of_the_package_has_its_layer() -> None:
    parts = {part_of(module_name(rel)) for rel, _ in sources()}
    assert parts == set(ALLOWED), (parts - set(ALLOWED), set(ALLOWED) - parts)


# -- each back door the house once had is caught -----------------------------------------

BACK_DOORS = [
    # a memory module reaching into the sweep package instead of a shared room
    (layering, "memory/secret_scan.py", "from tether.sweep import redaction\n", 1),
    # pure logic importing the ports (ports and core formed a loop)
    (layering, "core/recall/ranking.py", "from tether.ports import Found\n", 1),
    # production code importing the test helpers for a crash point
    (layering, "agent/turn.py", "from tether.testing.crash import crash_point\n", 1),
    # a session adapter calling the indexer (sessions imported memory)
    (layering, "sessions/importer.py", "from tether.memory.indexer import index_all\n", 1),
    # an adapter reaching another adapter
    (layering, "sessions/session.py", "from tether.stores import open_store\n", 1),
    # a use-case opening a concrete store instead of taking the port
    (layering, "imports/jsonl.py", "def f():\n    from tether.stores import open_store\n", 2),
    # a test-only import hidden under TYPE_CHECKING still counts
    (
        layering,
        "sweep/runner.py",
        "if TYPE_CHECKING:\n    from tether.testing import FakeLlama\n",
        2,
    ),
    # core doing I/O or reading the clock
    (purity, "core/recall/periods.py", "import os\n", 1),
    (purity, "core/timing/cron_expr.py", "from datetime import datetime\nx = datetime.now()\n", 2),
    # a Protocol outside ports/
    (protocols, "llm/types.py", "from typing import Protocol\nclass Llm(Protocol):\n    pass\n", 2),
    # the main store's repository reading the sweep's tables
    (
        sweep_sql,
        "stores/memory.py",
        'Q = "SELECT id, text FROM sweep_fact WHERE active = 1"\n',
        1,
    ),
    # the CLI assembling the sweep's runner
    (composition, "cli/commands_sweep.py", "runner = Runner(store, producer)\n", 1),
    # a command reading the wall clock instead of the application's (15 did in cli/)
    (
        wall_clock,
        "cli/commands_page.py",
        "from datetime import UTC, datetime\nt = datetime.now(UTC)\n",
        2,
    ),
    (wall_clock, "ui/app.py", "import time\nstamp = time.time()\n", 2),
    (wall_clock, "sweep/runner.py", "import datetime as dt\nday = dt.date.today()\n", 2),
    (wall_clock, "memory/notes.py", "from time import time as clock\nt = clock()\n", 2),
    # a test clock read from the environment by a command (TETHER_TEST_NOW lived there)
    (wall_clock, "cli/commands_sweep.py", "import datetime\nx = datetime.datetime.utcnow()\n", 2),
    # the test tree's CLI entry is the only module of testing that may import the CLI
    (layering, "testing/fake_llama.py", "from tether.cli.main import main\n", 1),
    # a use-case typed on all 43 methods of the store when it uses two
    (full_store, "memory/notes.py", "from tether.ports import Store, SweepStore\n", 1),
    (full_store, "sweep/spine.py", "from tether import ports\ndef f(s: ports.Store): ...\n", 2),
    # the page running a CLI command as a function (`session discard` handed over)
    (ui_apart, "ui/actions.py", "def f():\n    from tether.cli.commands_session import g\n", 2),
    (ui_apart, "ui/app.py", "import click\n", 1),
    (ui_apart, "ui/views.py", "from click import Command\n", 1),
    # the same, caught by the layers too
    (layering, "ui/actions.py", "from tether.cli.context import Context\n", 1),
    # a command borrowing another command module's helper (the clock, a warning, a backend)
    (
        command_apart,
        "cli/commands_session.py",
        "def f():\n    from tether.cli.commands_sweep import now\n",
        2,
    ),
    (command_apart, "cli/commands_setup.py", "import tether.cli.commands_hook\n", 1),
    # the recall use case opening a store itself (the caller opens it, or its fallback)
    (layering, "recall/home.py", "def f():\n    from tether.stores import open_store\n", 2),
    # `sweep status` counting receipts in the command itself
    (
        thin_commands,
        "cli/commands_sweep.py",
        "with sweep_store(ctx) as store, store.transaction(write=False) as tx:\n    pass\n",
        1,
    ),
    # doctor's checks reaching the command line
    (layering, "doctor/checks.py", "from tether.cli.context import Context\n", 1),
    # one-letter parameters (245 in src/tether once): a connection, a setting, a sort key's item
    (named_parameters, "stores/sqlite/file.py", "def tables(c):\n    return c\n", 1),
    (named_parameters, "ui/views.py", "def overview(\n    _r,\n    s: UiServices,\n): ...\n", 3),
    (named_parameters, "core/recall/ranking.py", "out.sort(key=lambda s: -s.score)\n", 1),
    (named_parameters, "llm/gguf.py", "async def read(*, n: int = 1): ...\n", 1),
    (named_parameters, "mcp/service.py", "def recall(query, k): ...\n", 1),
    # resources opened beside the application, each its own open and close: the sweep
    # worker's pool, stores and model; the imports' and hooks' vectors; recall's
    # read-only file on a full disk; doctor's vectors; the demo's and the sweep's model
    (opened_by_app, "daemon/fleet.py", "with PgPool(url, max_size=4) as pool:\n    pass\n", 1),
    (
        opened_by_app,
        "daemon/fleet.py",
        "def run_worker(url):\n    s = PostgresSweepStore(url, 'a', pool=pool)\n",
        2,
    ),
    (
        opened_by_app,
        "cli/embedding.py",
        "def f(home, config):\n    v = open_vectors(home, config)\n",
        2,
    ),
    (opened_by_app, "cli/commands_recall.py", "s = SqliteStore(path, snapshot=True)\n", 1),
    (
        opened_by_app,
        "daemon/vectors.py",
        "def lexical_reason(home, config):\n    vectors = open_vectors(home, config)\n",
        2,
    ),
    (opened_by_app, "cli/demo.py", "model = Recording(build_llm(config))\n", 1),
    (
        opened_by_app,
        "daemon/compose.py",
        "def sweep_llm(config):\n    return build_llm(config)\n",
        2,
    ),
    (
        opened_by_app,
        "memory/vectors.py",
        "from tether.llm import embedder\nv = embedder.load()\n",
        2,
    ),
    (opened_by_app, "ui/views.py", "from tether import stores\ns = stores.open_store(h, c)\n", 2),
]


@pytest.mark.parametrize(("check", "rel", "source", "line"), BACK_DOORS)
def test_each_old_back_door_breaks_a_rule(check: object, rel: str, source: str, line: int) -> None:
    assert callable(check)
    broken = check(rel, source)
    assert [(b.file, b.line) for b in broken] == [(rel, line)], broken


def test_what_the_house_allows_is_not_flagged() -> None:
    """The same checkers pass what the rules allow, so they do not flag everything."""
    assert layering("memory/recall.py", "from tether.ports import Store\n") == []
    assert layering("cli/commands_llm.py", "from tether.testing.fake_llama import x\n") == []
    assert (
        purity(
            "core/timing/cron_expr.py", "from datetime import datetime\nx = datetime(2026, 1, 1)\n"
        )
        == []
    )
    assert sweep_sql("stores/sqlite/sweep.py", 'Q = "SELECT id FROM sweep_fact"\n') == []
    assert sweep_sql("stores/postgres/sweep_schema.py", 'Q = "CREATE TABLE sweep_fact"\n') == []
    assert sweep_sql("stores/sqlite/store.py", '"""Facts mirrored from sweep_fact."""\n') == []
    assert composition(ROOT, "runner = Runner(store, producer)\n") == []
    assert wall_clock(CLOCK_ROOT, "from datetime import datetime\nx = datetime.now()\n") == []
    assert wall_clock("cli/commands_hook.py", "import time\nt = time.monotonic()\n") == []
    assert (
        wall_clock(
            "cli/commands_recall.py", "from datetime import datetime\nd = datetime(2026, 1, 1)\n"
        )
        == []
    )
    assert layering("testing/cli.py", "from tether.cli.main import main\n") == []
    assert full_store("memory/notes.py", "from tether.ports import NoteWriter\n") == []
    assert full_store("cli/context.py", "from tether.ports import Store\n") == []
    assert ui_apart("ui/actions.py", "from tether.sweep.marks import discard\n") == []
    assert command_apart("cli/commands_sweep.py", "from tether.cli.indexing import warn\n") == []
    assert command_apart("cli/main.py", "from tether.cli.commands_sweep import x\n") == []
    assert (
        thin_commands("sweep/status.py", "with store.transaction(write=False):\n    pass\n") == []
    )
    assert named_parameters("stores/sqlite/file.py", "def tables(conn, _):\n    i = 0\n") == []
    assert named_parameters("mcp/server.py", "async def recall(ctx, query, k=8): ...\n") == []
    assert named_parameters("core/x.py", "squares = [x * x for x in range(3)]\n") == []
    app = "class App:\n    def store(self):\n        return open_store(self.home, self.config)\n"
    assert opened_by_app(APP, app) == []
    assert (
        opened_by_app("stores/__init__.py", "def open_store(h, c):\n    return SqliteStore(h)\n")
        == []
    )
    assert opened_by_app("cli/commands_recall.py", "store = ctx.app.store()\n") == []


# -- the architecture page lists every module --------------------------------------------

_LISTED = re.compile(r"^\s*-\s+`([a-z_/]+\.py)`", re.MULTILINE)


def _holds_code(source: str) -> bool:
    """A package ``__init__`` that defines something (not only a docstring and re-exports)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            continue
        return True
    return False


def test_the_architecture_page_lists_every_module() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Every module", 1)
    assert len(section) == 2, "docs/architecture.md has no '## Every module' section"
    listed = set(_LISTED.findall(section[1].split("\n## ", 1)[0]))
    modules = {
        rel for rel, source in sources() if not rel.endswith("__init__.py") or _holds_code(source)
    }
    assert not modules - listed, f"missing from docs/architecture.md: {sorted(modules - listed)}"
    assert not listed - modules, f"listed but gone: {sorted(listed - modules)}"


# -- the Store is the union of its role ports ---------------------------------------------


def _methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def test_every_method_of_the_store_belongs_to_exactly_one_role_port() -> None:
    """A method added to ``Store`` itself, or to two roles, would let a consumer's slice
    and the union drift apart: each lives in one role, and ``Store`` adds only ``close``."""
    from typing import Protocol

    from tether.ports import store

    roles = [b for b in store.Store.__bases__ if b is not Protocol]
    assert len(roles) == 13, [r.__name__ for r in roles]
    seen: dict[str, str] = {}
    for role in roles:
        assert set(role.__bases__) == {Protocol}, role  # a role is made of nothing else
        for name in _methods(role):
            assert name not in seen, f"{name} is in {seen[name]} and {role.__name__}"
            seen[name] = role.__name__
    assert _methods(store.Store) == {"close"}
    slices = [
        v
        for v in vars(store).values()
        if isinstance(v, type)
        and v.__module__ == store.__name__  # not an imported ABC (Sequence, Callable)
        and issubclass(v, Protocol)
        and v not in (*roles, store.Store)
    ]
    slices = [s for s in slices if s is not Protocol]
    assert len(slices) >= 9, slices  # NoteWriter, RecallStore, MemoryStore, ...
    for s in slices:
        assert _methods(s) == set(), f"{s.__name__} defines methods: only roles do"
        assert set(s.__bases__) - {Protocol} <= set(roles), s  # made of roles only
