"""``tether hook install|claude-code|codex`` and ``tether context-pack``.

A hook command reads the harness's JSON on stdin, does its work (``checkpoint.hooks``),
prints what the harness reads (SessionStart: the pack) and **always exits 0**: whatever
goes wrong is a telemetry line, never a failed or blocked harness. ``session-end`` hands
its work to a detached child (the harness gives SessionEnd little time) unless ``--wait``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context, counted, pass_ctx
from tether.cli.install import CODEX_NOTE, explicit_home, project_dir

if TYPE_CHECKING:  # the hook's start-up loads what it uses, when it uses it
    from tether.checkpoint.hooks import HookSetting


def _setting(ctx: Context, harness: str, started: float) -> HookSetting:
    from tether.checkpoint.hooks import HookSetting
    from tether.errors import TetherError

    home = ctx.home
    now = ctx.now()
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
        on_banked=_recallable(ctx, config.slots.main),
    )


def _recallable(
    ctx: Context, slot: int
) -> Callable[[HookSetting, str, str, Callable[[], float]], tuple[str, str | None]]:
    """What a hook calls with each window it banked (``recall.banked``), over the
    command's store and vectors."""

    def remember(
        setting: HookSetting, session: str, segment: str, left: Callable[[], float]
    ) -> tuple[str, str | None]:
        from tether.recall.banked import remember_banked

        app = ctx.app
        return remember_banked(
            setting.home,
            session,
            segment,
            allow=setting.allow,
            left=left,
            slot=slot,
            store=app.store,
            vectors=app.vectors if app.vectors_on() else None,
        )

    return remember


def _stdin() -> bytes:
    """The harness's payload: at most one byte past ``MAX_PAYLOAD_BYTES`` is read (an
    endless stdin is refused as ``payload_too_large``, never read to its end)."""
    from tether.harnesses.hooks import MAX_PAYLOAD_BYTES

    try:
        if sys.stdin is None or sys.stdin.isatty():
            return b""
        return sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
    except (OSError, ValueError):
        return b""


def _detach(
    ctx: Context, harness: str, event: str, data: bytes, flags: tuple[str, ...] = ("--wait",)
) -> bool:
    """Run the hook in a detached child fed ``data``; False when it cannot be started."""
    args = [sys.executable, "-m", "tether.cli.main", "--home", str(ctx.home)]
    try:
        child = subprocess.Popen(
            [*args, "hook", harness, event, *flags],
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


def run_hook_command(
    ctx: Context, harness: str, event: str, *, wait: bool = True, rest_from: int | None = None
) -> None:
    started = time.monotonic()
    try:
        data = _stdin()
        if not wait and _detach(ctx, harness, event, data):
            return
        from dataclasses import replace

        from tether.checkpoint.hooks import run_hook

        def rest(offset: int) -> bool:  # what PreCompact's deadline left: a child's
            return _detach(ctx, harness, event, data, ("--rest-from", str(offset)))

        setting = replace(_setting(ctx, harness, started), rest_from=rest_from, detach=rest)
        out = run_hook(setting, event, data)
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
@click.option(
    "--rest-from",
    type=click.IntRange(min=0),
    metavar="OFFSET",
    help="Bank what is left of the window that begins at byte OFFSET, with no deadline "
    "(the hook's own detached child runs this).",
)
@pass_ctx
def cc_pre_compact(ctx: Context, rest_from: int | None) -> None:
    """Bank the window since the last compaction boundary, then schedule its harvest."""
    run_hook_command(ctx, "claude-code", "pre-compact", rest_from=rest_from)


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
    """Codex's hooks: PreCompact, PostCompact, SessionStart, SessionEnd (as Claude Code's)."""


@codex_group.command("pre-compact")
@pass_ctx
def codex_pre_compact(ctx: Context) -> None:
    """Bank the rollout's window since its last compaction, then schedule its harvest."""
    run_hook_command(ctx, "codex", "pre-compact")


@codex_group.command("post-compact")
@pass_ctx
def codex_post_compact(ctx: Context) -> None:
    """Bank any window of the rollout that the ledger lacks (the backstop)."""
    run_hook_command(ctx, "codex", "post-compact")


@codex_group.command("session-start")
@pass_ctx
def codex_session_start(ctx: Context) -> None:
    """Print the context pack (after a compaction: bank any window PreCompact missed)."""
    run_hook_command(ctx, "codex", "session-start")


@codex_group.command("session-end")
@_wait
@pass_ctx
def codex_session_end(ctx: Context, wait: bool) -> None:
    """Bank what no boundary covered of the rollout: the remainder, or all of it."""
    run_hook_command(ctx, "codex", "session-end", wait=wait)


# -- install ---------------------------------------------------------------------------


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
    and hook (running it twice changes nothing; --uninstall removes only tether's).
    `tether setup` does this and registers the MCP server too."""
    from tether.harnesses.hooks import (
        check_hooks_shape,
        merge_hooks,
        read_settings,
        remove_hooks,
        write_settings,
    )
    from tether.harnesses.setup import hook_entries, hooks_path, tether_program

    path = hooks_path(harness, project_dir(project, user))
    doc = read_settings(path)
    check_hooks_shape(doc, path)
    if uninstall:
        changed = remove_hooks(doc)
    else:
        entries = hook_entries(harness, tether_program(), explicit_home(ctx))
        changed = merge_hooks(doc, path, entries)
    if changed:
        write_settings(path, doc)
    verb = "removed from" if uninstall else "installed in"
    click.echo(f"{'hooks ' + verb if changed else 'nothing to change in'} {path}")
    if harness == "codex" and not uninstall:
        click.echo(CODEX_NOTE + "; per-turn context is `tether context-pack`", err=True)


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
    from tether.checkpoint.recallable import catch_up
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
        session, report = bank_transcript(home, one, harness, ctx.now(), allow)
        catch_up(home, allow=allow, slot=config.slots.main, wait=True)  # into recall
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
    embedded = _index_and_embed(ctx)
    if as_json:
        echo_json(results)
    elif embedded:
        click.echo(f"{counted(embedded, 'row')} embedded for recall")
    if failed:
        raise click.exceptions.Exit(1)


def _index_and_embed(ctx: Context) -> int | None:
    """What ingest put in sessions, indexed and embedded (vectors on), with the meter."""
    from tether.cli.embedding import embed_added
    from tether.cli.indexing import warn_unindexed
    from tether.cli.progress import terminal_meter
    from tether.memory.indexer import index_home

    with ctx.store() as store, terminal_meter() as meter:
        report = index_home(ctx.home, store)
        warn_unindexed(report.errors, report.damaged)
        return embed_added(ctx.app, meter)


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
