"""``tether --help`` lists every command without importing a command module, and prints
exactly what it printed when it imported them all."""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest

from tether.cli.main import COMMANDS, MEMORY_COMMANDS, MEMORY_SUMMARIES, SUMMARIES, lazy_command

_EAGER = (
    "import tether.cli.main as m\n"
    "for name in m.COMMANDS: m.cli.get_command(None, name)\n"
    "memory = m.cli.get_command(None, 'memory')\n"
    "for name in m.MEMORY_COMMANDS: memory.get_command(None, name)\n"
    "m.main({argv!r})\n"
)
_LAZY = "import tether.cli.main as m\nm.main({argv!r})\n"
_LOADED = (
    "import sys\nimport tether.cli.main as m\n"
    "try:\n    m.main({argv!r})\nexcept SystemExit:\n    pass\n"
    "print(sorted(n for n in sys.modules if n.startswith('tether.cli.commands')))\n"
)


def _first_paragraph(command: click.Command) -> str:
    text = command.short_help or command.help or ""
    return " ".join(text.split("\n\n")[0].split())


def _run(code: str, columns: int) -> tuple[int, str, str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("lazy", "summaries", "table"),
    [(COMMANDS, SUMMARIES, "COMMANDS"), (MEMORY_COMMANDS, MEMORY_SUMMARIES, "MEMORY_COMMANDS")],
)
def test_each_summary_is_its_commands_own_help(
    lazy: dict[str, str], summaries: dict[str, str], table: str
) -> None:
    assert set(summaries) == set(lazy)
    for name, module in lazy.items():
        assert summaries[name] == _first_paragraph(lazy_command(module, name, table)), name


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["memory", "--help"], []])
@pytest.mark.parametrize("columns", [60, 80, 160])
def test_help_is_what_it_was_with_every_module_imported(argv: list[str], columns: int) -> None:
    lazy = _run(_LAZY.format(argv=argv), columns)
    assert "Commands:" in lazy[1] + lazy[2]
    assert lazy == _run(_EAGER.format(argv=argv), columns)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["memory", "--help"]])
def test_help_imports_no_command_module(argv: list[str]) -> None:
    code, out, _ = _run(_LOADED.format(argv=argv), 80)
    assert code == 0
    assert out.splitlines()[-1] == "[]"
