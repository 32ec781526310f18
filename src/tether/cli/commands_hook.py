"""``tether hook install|claude-code|codex`` and ``tether context-pack``.

A hook command reads the harness's JSON on stdin, does its work (``checkpoint.hooks``),
prints what the harness reads (SessionStart: the pack) and **always exits 0**: whatever
goes wrong is a telemetry line, never a failed or blocked harness. ``session-end`` hands
its work to a detached child (the harness gives SessionEnd little time) unless ``--wait``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context, pass_ctx

if TYPE_CHECKING:  # the hook's start-up loads what it uses, when it uses it
    from tether.checkpoint.hooks import HookSetting


def _setting(ctx: Context, harness: str, started: float) -> HookSetting:
    from tether.checkpoint.hooks import HookSetting
    from tether.errors import TetherError

    home = ctx.home
    now = datetime.now(UTC)
    try:
        config = ctx.config()
    except TetherError:
        return HookSetting(home, harness, now, started, config_ok=False)
    try:
        from tether.scan.allow import home_allow

        allow = home_allow(home)
    except TetherError:
        allow = frozenset()  # a broken allow file: redact every hit (the safe side)
    cp = config.checkpoint
    return HookSetting(
        home,
        harness,
        now,
        started,
        deadline_s=cp.deadline_s,
        pack_tokens=cp.pack_tokens,
        allow=allow,
        writeback=cp.auto_writeback,
    )


def _stdin() -> bytes:
    try:
        return b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    except (OSError, ValueError):
        return b""


def _detach(ctx: Context, harness: str, event: str, data: bytes) -> bool:
    """Run the hook in a detached child fed ``data``; False when it cannot be started."""
    args = [sys.executable, "-m", "tether.cli.main", "--home", str(ctx.home)]
    try:
        child = subprocess.Popen(
            [*args, "hook", harness, event, "--wait"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        assert child.stdin is not None
        child.stdin.write(data)
        child.stdin.close()
    except OSError:
        return False
    return True


def run_hook_command(ctx: Context, harness: str, event: str, *, wait: bool = True) -> None:
    started = time.monotonic()
    try:
        data = _stdin()
        if not wait and _detach(ctx, harness, event, data):
            return
        from tether.checkpoint.hooks import run_hook

        out = run_hook(_setting(ctx, harness, started), event, data)
        if out.stdout:
            sys.stdout.buffer.write(out.stdout)
            sys.stdout.flush()
        if out.error:
            click.echo(
                f"tether hook {event}: {out.error} (see telemetry/heartbeat.jsonl)", err=True
            )
    except Exception as exc:  # the last guard: a hook never fails its harness
        click.echo(f"tether hook {event}: {type(exc).__name__}", err=True)


@click.group("hook")
def hook_group() -> None:
    """Harness hooks: install them, and the hooks themselves (stdin: the harness's JSON;
    they always exit 0 and never block the harness)."""


@hook_group.group("claude-code")
def claude_code_group() -> None:
    """Claude Code's hooks: PreCompact, SessionStart, SessionEnd (and PostCompact)."""


@claude_code_group.command("pre-compact")
@pass_ctx
def cc_pre_compact(ctx: Context) -> None:
    """Bank the window since the last compaction boundary, then schedule its harvest."""
    run_hook_command(ctx, "claude-code", "pre-compact")


@claude_code_group.command("session-start")
@pass_ctx
def cc_session_start(ctx: Context) -> None:
    """Print the context pack (after a compaction: bank any window PreCompact missed)."""
    run_hook_command(ctx, "claude-code", "session-start")


@claude_code_group.command("post-compact")
@pass_ctx
def cc_post_compact(ctx: Context) -> None:
    """Bank any window of the transcript that the ledger lacks (the backstop)."""
    run_hook_command(ctx, "claude-code", "post-compact")


_wait = click.option(
    "--wait", is_flag=True, help="Do the work in this process instead of a detached child."
)


@claude_code_group.command("session-end")
@_wait
@pass_ctx
def cc_session_end(ctx: Context, wait: bool) -> None:
    """Bank what no boundary covered: the remainder, or the whole transcript."""
    run_hook_command(ctx, "claude-code", "session-end", wait=wait)


@hook_group.group("codex")
def codex_group() -> None:
    """Codex's hooks: SessionEnd capture (per-turn context is the pull protocol)."""


@codex_group.command("session-end")
@_wait
@pass_ctx
def codex_session_end(ctx: Context, wait: bool) -> None:
    """Bank what no boundary covered of the rollout: the remainder, or all of it."""
    run_hook_command(ctx, "codex", "session-end", wait=wait)


# -- install ---------------------------------------------------------------------------


def _tether_command() -> str:
    """How the harness runs tether: this program's absolute path when it is ``tether``,
    else the one on PATH, else the bare name."""
    me = Path(sys.argv[0])
    if me.name == "tether" and me.exists() and not any(c.isspace() for c in str(me)):
        return str(me.absolute())
    found = shutil.which("tether")
    return found if found and not any(c.isspace() for c in found) else "tether"


def _settings_path(harness: str, project: str | None, user: bool) -> Path:
    if harness == "claude-code":
        base = Path.home() if user else Path(project or ".").absolute()
        return base / ".claude" / "settings.json"
    if user:
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "hooks.json"
    return Path(project or ".").absolute() / ".codex" / "hooks.json"


def _home_args(ctx: Context) -> str:
    from tether.home import resolve_home

    default = resolve_home(None) if not os.environ.get("TETHER_HOME") else None
    home = ctx.home
    if default is not None and home == default and ctx.home_option is None:
        return ""
    return f" --home {home}" if not any(c.isspace() for c in str(home)) else ""


@hook_group.command("install")
@click.option(
    "--harness", type=click.Choice(["claude-code", "codex"]), required=True, help="Which harness."
)
@click.option("--project", metavar="DIR", help="The project's settings (default: this folder).")
@click.option("--user", is_flag=True, help="The user's settings (~/.claude, ~/.codex).")
@click.option("--uninstall", is_flag=True, help="Remove exactly the entries tether added.")
@pass_ctx
def install_cmd(
    ctx: Context, harness: str, project: str | None, user: bool, uninstall: bool
) -> None:
    """Merge tether's hook entries into the harness's settings, keeping every other key
    and hook (running it twice changes nothing; --uninstall removes only tether's)."""
    from tether.errors import BadInputError
    from tether.harnesses.hooks import (
        HookEntry,
        merge_hooks,
        read_settings,
        remove_hooks,
        write_settings,
    )

    if project and user:
        raise BadInputError("--project and --user name different files: give one")
    path = _settings_path(harness, project, user)
    doc = read_settings(path)
    base = f"{_tether_command()}{_home_args(ctx)} hook {harness}"
    if harness == "claude-code":
        entries = [
            HookEntry("PreCompact", f"{base} pre-compact", 10),
            HookEntry("SessionStart", f"{base} session-start", 10),
            HookEntry("SessionEnd", f"{base} session-end", 5),
        ]
    else:
        entries = [HookEntry("SessionEnd", f"{base} session-end", 3)]
    changed = remove_hooks(doc) if uninstall else merge_hooks(doc, path, entries)
    if changed:
        write_settings(path, doc)
    verb = "removed from" if uninstall else "installed in"
    click.echo(f"{'hooks ' + verb if changed else 'nothing to change in'} {path}")
    if harness == "codex" and not uninstall:
        click.echo(
            "codex: hooks run once `[features] hooks = true` is in ~/.codex/config.toml and you "
            "trust the new entry in Codex's /hooks; per-turn context is `tether context-pack`",
            err=True,
        )


# -- the pull protocol -------------------------------------------------------------------


@click.command("context-pack")
@click.option("--session", "session", metavar="ID", help="A tether or harness session id.")
@pass_ctx
def context_pack_cmd(ctx: Context, session: str | None) -> None:
    """Print the context pack (what SessionStart injects) for the pull protocol: Codex,
    opencode, any harness that reads it after a compaction."""
    from tether.checkpoint.bank import ledger_path
    from tether.checkpoint.pack import context_pack
    from tether.harnesses import claude_code, codex
    from tether.ids import is_session_id

    sid = None
    if session is not None:
        candidates = [session] if is_session_id(session) else []
        candidates += [claude_code.session_id_for(session), codex.session_id_for(session)]
        sid = next((c for c in candidates if ledger_path(ctx.home, c).exists()), candidates[0])
    pack = context_pack(ctx.home, sid, budget=ctx.config().checkpoint.pack_tokens)
    click.echo(pack.text, nl=False)


# -- by hand -----------------------------------------------------------------------------


@click.group("transcripts")
def transcripts_group() -> None:
    """Harness transcripts into the corpus, and their facts (the owner's explicit lane)."""


@transcripts_group.command("ingest")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "harness",
    type=click.Choice(["claude-code", "codex"]),
    default="claude-code",
    show_default=True,
    help="The transcript's harness.",
)
@click.option("--facts", is_flag=True, help="Extract its facts now, with the configured model.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def ingest_cmd(ctx: Context, path: Path, harness: str, facts: bool, as_json: bool) -> None:
    """Bank a whole transcript (or each under a folder) as a segment of corpus/; with
    --facts, extract its facts now. Never gated by [checkpoint] auto_writeback."""
    import asyncio

    from tether.checkpoint.hooks import bank_transcript
    from tether.cli.context import echo_json
    from tether.errors import NotFoundError
    from tether.imports.transcript import transcripts_in
    from tether.scan.allow import home_allow

    config = ctx.config()
    home = ctx.home
    if not path.exists():
        raise NotFoundError(f"no transcript {path}")
    allow = home_allow(home)
    results = []
    failed = False
    for one in transcripts_in(path):
        session, report = bank_transcript(home, one, harness, datetime.now(UTC), allow)
        row: dict[str, object] = {
            "transcript": str(one),
            "session": session,
            "segment": report.code,
            "link": report.link,
        }
        if facts and report.path is not None:
            from tether.daemon.compose import harvest_now

            done = asyncio.run(harvest_now(home, config, report.path.name, lane="ingest"))
            row.update(
                outcome=done.outcome,
                inserted=done.inserted,
                duplicate=done.duplicate,
                links=done.links,
                path=done.path,
                cause=done.cause,
                detail=done.detail,
                model_calls=done.model_calls,
                model_failed=done.model_failed,
                extractive=done.extractive,
            )
            failed = failed or done.outcome == "failed"
        results.append(row)
        if not as_json:
            click.echo(f"{one}: {report.code} {report.link or ''}{_facts_line(row)}")
    if as_json:
        echo_json(results)
    if failed:
        raise click.exceptions.Exit(1)


def _facts_line(row: dict[str, object]) -> str:
    """What ``--facts`` did, said plainly: how many, by which path, and why the model
    gave nothing when it did not."""
    if "outcome" not in row:
        return ""
    outcome = row["outcome"]
    counts = f"{row['inserted']} new, {row['duplicate']} already known"
    if outcome in ("fallback", "failed"):
        what = "by the extractive path only" if outcome == "fallback" else "none learned"
        return (
            f"; facts: {outcome} ({counts}, {what}): the model failed on "
            f"{row['model_failed']} call(s): {row['cause']}: {row['detail']}; "
            "no receipt kept, so the next run retries"
        )
    if outcome == "already_ingested":
        return "; facts: already_ingested (a receipt covers this segment)"
    line = f"; facts: {outcome} ({counts}, by {row['path'] or 'nothing'}"
    if row.get("cause"):
        line += f"; no model: {row['cause']}"
    line += ")"
    if outcome == "empty":
        line += ": no fact found (only this command asks again)"
    return line


COMMANDS = [hook_group, context_pack_cmd, transcripts_group]
