"""``tether sessions import FILE`` and ``tether memory recall QUERY``.

``memory recall`` runs the same search as the agent's ``recall`` tool, after an
incremental index pass so turns written since the last pass are found too. Its ``--json``
output is a contract: a list of ``{"kind", "session", "turn", "text", "tag", "score"}``;
with ``--sessions``, a list of ``{"session", "score", "turns": [hit, ...]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from tether.cli.context import Context, counted, echo_json, pass_ctx, utc_stamp
from tether.cli.with_sweep import recall
from tether.imports.jsonl import import_jsonl
from tether.memory.indexer import index_home, reindex
from tether.memory.recall import SessionHit, recall_sessions
from tether.records import Hit

#: Characters of a hit's text on one line of human output.
TEXT_CHARS = 120


def hit_json(hit: Hit) -> dict[str, Any]:
    """The public shape of one ``memory recall --json`` hit (add keys, never rename)."""
    return {
        "kind": hit.kind,
        "session": hit.session,
        "turn": hit.turn,
        "text": hit.text,
        "tag": hit.tag,
        "score": round(hit.score, 4),
    }


def session_json(found: SessionHit) -> dict[str, Any]:
    """The public shape of one ``memory recall --sessions --json`` session."""
    return {
        "session": found.session,
        "score": round(found.score, 4),
        "turns": [hit_json(h) for h in found.turns],
    }


def _warn_unindexed(errors: Sequence[tuple[str, str]]) -> None:
    """One stderr line per session an index pass had to leave out."""
    for sid, problem in errors:
        click.echo(f"tether: warning: session {sid} not indexed: {problem}", err=True)


def _one_line(text: str, width: int = TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command("recall")
@click.argument("query")
@click.option("-k", "k", type=int, default=5, show_default=True, help="Hits to return.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of hits.")
@click.option(
    "--sessions",
    "by_session",
    is_flag=True,
    help="Rank whole conversations: the K sessions that best answer QUERY.",
)
@pass_ctx
def recall_cmd(ctx: Context, query: str, k: int, as_json: bool, by_session: bool) -> None:
    """Search memory (every epoch of every session, notes, pages, identity, facts)."""
    home = ctx.home
    with ctx.store() as store:
        report = index_home(home, store)
        now = datetime.now(UTC)
        if by_session:
            sessions = recall_sessions(store, query, k, time=now)
        else:
            hits = recall(store, query, k, time=now, home=home)
    _warn_unindexed(report.errors)
    if by_session:
        _print_sessions(sessions, as_json)
        return
    if as_json:
        echo_json([hit_json(h) for h in hits])
        return
    if not hits:
        click.echo("no matches")
        return
    wheres = [f"{h.session}#{h.turn}" if h.session is not None else h.ref for h in hits]
    width = max(24, *(len(w) for w in wheres))  # imported ids (cc-<uuid>) run long
    for h, where in zip(hits, wheres, strict=True):
        click.echo(f"{h.tag:<14} {where:<{width}} {h.score:7.2f}  {_one_line(h.text)}")


@click.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@pass_ctx
def reindex_cmd(ctx: Context, as_json: bool) -> None:
    """Drop the index of session logs and build it again from the files.

    For a log that was edited or restored by hand (recall then warns that it is shorter
    than what was indexed). Notes, pages, identity, facts, the journal and recall counts
    are kept. A session that cannot be read is reported and left out; exit 1 then.
    """
    with ctx.store() as store:
        report = reindex(ctx.home, store)
    if as_json:
        echo_json(
            {
                "sessions": report.sessions,
                "files": report.files,
                "rows": report.rows,
                "errors": [{"session": sid, "problem": p} for sid, p in report.errors],
            }
        )
    else:
        click.echo(
            f"reindexed {counted(report.sessions, 'session')} "
            f"({counted(report.files, 'log')}): {counted(report.rows, 'row')}"
        )
        _warn_unindexed(report.errors)
    if report.errors:
        click.get_current_context().exit(1)


def _print_sessions(sessions: list[SessionHit], as_json: bool) -> None:
    if as_json:
        echo_json([session_json(s) for s in sessions])
        return
    if not sessions:
        click.echo("no matches")
        return
    width = max(24, *(len(s.session) for s in sessions))
    for s in sessions:
        best = s.turns[0]
        # A session is as trusted as its least trusted turn found.
        tag = "memory-tainted" if any(h.tag == "memory-tainted" for h in s.turns) else "memory"
        turns = counted(len(s.turns), "turn")
        click.echo(
            f"{tag:<14} {s.session:<{width}} {s.score:7.2f}  {turns:<9} "
            f"#{best.turn} {_one_line(best.text, TEXT_CHARS - 12)}"
        )


@click.group("sessions")
def sessions_group() -> None:
    """Bring sessions in from elsewhere."""


@sessions_group.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tether", "claude-code", "codex"]),
    default="tether",
    show_default=True,
    help="tether: lines of {session, role, text, time}; claude-code: a Claude Code "
    "transcript (~/.claude/projects/*/*.jsonl); codex: a Codex rollout "
    "(~/.codex/sessions/*/*/*/rollout-*.jsonl).",
)
@pass_ctx
def import_cmd(ctx: Context, file: Path, fmt: str) -> None:
    """Import a JSONL file of {"session","role","text","time","speaker"?} lines, or a
    Claude Code transcript or Codex rollout (--format claude-code|codex).

    The whole file is checked first: a bad line exits 2 naming file:line, and nothing is
    imported. Existing sessions are appended to; the home is indexed afterwards. Run it
    again after a crash or Ctrl-C to finish the import (nothing is written twice); run
    again after it finished, it writes nothing. A transcript imported again adds only
    the messages it gained since; FILE may then be a folder (every *.jsonl below it).
    """
    if fmt != "tether":
        _import_transcript(ctx, file, fmt)
        return
    report = import_jsonl(ctx.home, file, now=datetime.now(UTC), config=ctx.config())
    if report.already is not None:
        click.echo(
            f"already imported at {utc_stamp(report.already)}: nothing written "
            f"(its ledger is {report.ledger}; remove it to import the file again)"
        )
        return
    if report.resumed:
        click.echo(
            f"finished an interrupted import of this file: {counted(report.resumed, 'record')} "
            "were already in and were not written again"
        )
    click.echo(
        f"imported {counted(report.records, 'record')} ({counted(report.turns, 'turn')}): "
        f"{counted(report.sessions_created, 'session')} created, "
        f"{report.sessions_appended} appended; {counted(report.indexed_rows, 'row')} indexed"
    )
    _warn_unindexed(report.index_errors)


def _import_transcript(ctx: Context, file: Path, harness: str) -> None:
    from tether.imports.transcript import (
        import_transcript,
        skipped_words,
        transcripts_in,
    )

    paths = transcripts_in(file)
    report = import_transcript(
        ctx.home, paths, harness=harness, now=datetime.now(UTC), config=ctx.config()
    )
    skipped = skipped_words(report.skipped)
    if len(paths) == 1:
        source = "the transcript's"
        into = ", ".join(report.sessions) or "no session"
    else:
        source = f"{counted(len(paths), 'transcript')}'"
        into = counted(len(report.sessions), "session")
    if report.imported is None:
        said = f"nothing new: {source} {counted(report.messages, 'message')} are in"
        click.echo(f"{said} ({into})" + (f"; {skipped}" if skipped else ""))
        return
    r = report.imported
    click.echo(
        f"imported {report.new} of {source} {counted(report.messages, 'message')} "
        f"({counted(r.turns, 'turn')}) into {into}; {counted(r.indexed_rows, 'row')} indexed"
    )
    if skipped:
        click.echo(skipped)
    _warn_unindexed(r.index_errors)


COMMANDS = [sessions_group]
MEMORY_COMMANDS = [recall_cmd, reindex_cmd]
