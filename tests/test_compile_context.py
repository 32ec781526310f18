"""``tether compile-context``, as a user runs it in a project directory: the view's file,
``--check``, AGENTS.md's managed block, and what is left out and why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from daemon_helpers import tether

pytestmark = pytest.mark.slow

ADA = "# Ada Lovelace\n\nMy sister-in-law. She sails the Marigold Seven on Sundays.\n"
BOB = "Bob runs the build farm; write to bob@example.com about access.\n"


def write(home: Path, slug: str, body: str, *args: str) -> None:
    out = tether(home, "page", "write", slug, *args, input=body)
    assert out.returncode == 0, out.stderr


def compile_in(project: Path, home: Path, *args: str) -> tuple[int, str, str]:
    out = tether(home, "compile-context", *args, "--out", str(project / _out(args)))
    return out.returncode, out.stdout, out.stderr


def _out(args: tuple[str, ...]) -> str:
    target = args[args.index("--target") + 1]
    return {"claude-code": "tether-context.md", "codex": "AGENTS.md", "openclaw": "ctx.md"}[target]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_world_pages_go_in_private_ones_stay_and_check_says_when_it_is_stale(
    home: Path, project: Path
) -> None:
    write(home, "people/ada", ADA, "--visibility", "world")
    write(home, "diary/today", "Felt low; told nobody.\n")  # private by default
    write(home, "projects/tether", "Rust daemon, Python brain.\n", "--visibility", "world",
          "--tag", "compile-context", "--title", "The tether project")  # fmt: skip
    view = project / "tether-context.md"

    code, out, err = compile_in(project, home, "--target", "claude-code")
    assert (code, err) == (0, "")
    assert out.startswith(f"wrote {view}: 2 pages, ")
    text = view.read_text()
    assert text.index("(tether://projects/tether)") < text.index("(tether://people/ada)")
    assert "She sails the Marigold Seven on Sundays." in text
    assert "Felt low" not in text
    assert "diary/today" not in text
    assert text.count("Ada Lovelace") == 1  # the title is the entry's heading, once
    assert oct(view.stat().st_mode & 0o777) == "0o644"

    stamp = view.stat().st_mtime_ns
    code, out, _ = compile_in(project, home, "--target", "claude-code")
    assert code == 0
    assert "is up to date" in out
    assert view.stat().st_mtime_ns == stamp  # not rewritten
    assert compile_in(project, home, "--target", "claude-code", "--check")[0] == 0

    write(home, "people/cy", "Cy keeps bees.\n", "--visibility", "world")
    code, _, err = compile_in(project, home, "--target", "claude-code", "--check")
    assert code == 1
    assert "is stale: run `tether compile-context --target claude-code`" in err
    assert view.read_text() == text  # --check writes nothing
    assert compile_in(project, home, "--target", "claude-code")[0] == 0
    assert "Cy keeps bees." in view.read_text()


def test_agents_md_keeps_the_owners_text_and_its_symlink(home: Path, project: Path) -> None:
    write(home, "people/ada", ADA, "--visibility", "world")
    agents = project / "AGENTS.md"
    agents.write_text("# Agents\n\nUse ruff.\n")
    (project / "CLAUDE.md").symlink_to("AGENTS.md")
    out = tether(home, "compile-context", "--target", "codex", "--out", str(project / "CLAUDE.md"))
    assert out.returncode == 0, out.stderr
    assert (project / "CLAUDE.md").is_symlink()
    text = agents.read_text()
    assert text.startswith("# Agents\n\nUse ruff.\n\n<!-- tether:begin compile-context -->\n")
    assert text.endswith("<!-- tether:end compile-context -->\n")

    agents.write_text(text + "\nOwner's note after the block.\n")
    write(home, "people/ada", ADA.replace("Sundays", "Saturdays"), "--visibility", "world")
    code, _, _ = compile_in(project, home, "--target", "codex")
    assert code == 0
    again = agents.read_text()
    assert again.startswith("# Agents\n\nUse ruff.\n\n")
    assert again.endswith("<!-- tether:end compile-context -->\n\nOwner's note after the block.\n")
    assert "Saturdays" in again
    assert "Sundays" not in again

    broken = again + "<!-- tether:begin compile-context -->\n"
    agents.write_text(broken)
    code, _, err = compile_in(project, home, "--target", "codex")
    assert code == 2
    lines = broken.count("\n")
    assert err.startswith(f"tether: error: {agents}:{lines}: expected one ")
    assert "runbook: view-block-malformed" in err
    assert agents.read_text() == broken


def test_what_may_not_leave_is_left_out_and_named_until_allowed(home: Path, project: Path) -> None:
    write(home, "people/ada", ADA, "--visibility", "world")
    write(home, "people/bob", BOB, "--visibility", "world")
    write(home, "work/falcon", "Project Falcon ships in May.\n", "--visibility", "world")
    (home / ".tether-scan-blocklist").write_text("# code names\nproject falcon\n")

    code, _, err = compile_in(project, home, "--target", "openclaw", "--json")
    assert code == 0
    report = json.loads(tether(home, "compile-context", "--target", "openclaw", "--check",
                               "--json", "--out", str(project / "ctx.md")).stdout)  # fmt: skip
    assert report["status"] == "current"
    assert report["pages"] == ["people/ada"]
    left = {x["slug"]: x for x in report["left_out"]}
    assert left["people/bob"]["rule"] == "email"
    assert left["work/falcon"]["rule"] == "blocklist:2"
    text = (project / "ctx.md").read_text()
    assert "bob@example.com" not in text
    assert "Falcon" not in text

    code, _, err = compile_in(project, home, "--target", "openclaw")
    assert (
        f"left out people/bob: it holds email (fingerprint {left['people/bob']['fingerprint']}"
        in err
    )
    assert f"add the fingerprint to {home / '.tether-scan-allow'}" in err

    (home / ".tether-scan-allow").write_text(left["people/bob"]["fingerprint"] + "\n")
    code, _, _ = compile_in(project, home, "--target", "openclaw")
    assert code == 0
    assert "bob@example.com" in (project / "ctx.md").read_text()

    (home / ".tether-scan-blocklist").write_text("re: (falcon\n")
    before = (project / "ctx.md").read_text()
    code, _, err = compile_in(project, home, "--target", "openclaw")
    assert code == 2
    assert f"{home / '.tether-scan-blocklist'}:1: not a regular expression" in err
    assert (project / "ctx.md").read_text() == before


def test_a_budget_too_small_says_so_in_the_file_and_names_every_page(
    home: Path, project: Path
) -> None:
    for name in ("ada", "bo", "cy"):
        write(home, f"people/{name}", f"{name} is a friend.\n", "--visibility", "world")
    code, out, err = compile_in(project, home, "--target", "claude-code", "--budget", "40")
    assert code == 0
    assert out.startswith(f"wrote {project / 'tether-context.md'}: 0 pages, ")
    assert "left out 3 pages past the budget of 40 tokens: people/cy, people/bo, people/ada" in err
    # Not a silent success: the budget is below the file's own header (issue 17, item 8).
    assert "a budget of 40 tokens is less than the file's own header and note" in err
    assert "it holds no page" in err
    assert (
        (project / "tether-context.md")
        .read_text()
        .endswith("<!-- no page fits a budget of 40 tokens -->\n")
    )


def test_a_path_that_cannot_be_used_is_one_line_and_exit_2(home: Path, project: Path) -> None:
    write(home, "people/ada", ADA, "--visibility", "world")
    (project / "file").write_text("not a directory\n")
    under_a_file = str(project / "file" / "x.md")
    out = tether(home, "compile-context", "--target", "openclaw", "--out", under_a_file)
    assert (out.returncode, out.stderr) == (
        2,
        f"tether: error: {under_a_file}: cannot read: Not a directory\n",
    )
    # /proc takes no new files, whoever runs the test.
    out = tether(home, "compile-context", "--target", "openclaw", "--out", "/proc/version")
    assert out.returncode == 2
    assert out.stderr.startswith("tether: error: /proc/version: cannot write: ")
    assert out.stderr.endswith("; the file was not changed\n")


def test_the_default_path_is_under_the_current_directory(home: Path, project: Path) -> None:
    write(home, "people/ada", ADA, "--visibility", "world")
    cwd = os.getcwd()
    try:
        os.chdir(project)
        out = tether(home, "compile-context", "--target", "claude-code")
    finally:
        os.chdir(cwd)
    assert out.returncode == 0, out.stderr
    assert "Marigold" in (project / ".claude" / "tether-context.md").read_text()
