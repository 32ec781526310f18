"""``tether sessions import FILE``: bring sessions in from elsewhere."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import click

from tether.cli.context import Context, counted, pass_ctx, utc_stamp
from tether.cli.embedding import embed_added, embedded_words
from tether.cli.indexing import warn_unindexed
from tether.cli.progress import terminal_meter
from tether.errors import BadInputError, TetherError
from tether.files import MAX_LINE_BYTES
from tether.imports.jsonl import import_jsonl


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
    FILE - reads standard input.
    """
    if str(file) == "-":
        with _spooled_stdin(ctx.home) as spool:
            try:
                _import(ctx, spool, fmt)
            except TetherError as exc:  # name the input as the user gave it, not the spool
                exc.message = exc.message.replace(str(spool), "<stdin>")
                raise
        return
    _import(ctx, file, fmt)


#: The most standard input is spooled to disk for an import (``yes | tether sessions
#: import -`` must not fill the disk).
MAX_SPOOL_BYTES = 1024 * 1024 * 1024


def _copy_bounded(source: BinaryIO, out: BinaryIO) -> None:
    """Copy ``source`` to ``out``, refused past ``MAX_SPOOL_BYTES`` or at a line past
    ``MAX_LINE_BYTES`` (``< /dev/zero``) as soon as it gets there."""
    copied = line = 0
    number = 1
    while block := source.read(1024 * 1024):
        copied += len(block)
        if copied > MAX_SPOOL_BYTES:
            raise BadInputError(
                f"<stdin>: more than {MAX_SPOOL_BYTES // (1024 * 1024)} MiB; "
                "write it to a file and import the file"
            )
        last = block.rfind(b"\n")
        number += block.count(b"\n")
        line = len(block) - last - 1 if last >= 0 else line + len(block)
        if line > MAX_LINE_BYTES:
            raise BadInputError(
                f"<stdin>: line {number} is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB, "
                "the most an import line may be"
            )
        out.write(block)


@contextlib.contextmanager
def _spooled_stdin(home: Path) -> Iterator[Path]:
    """Standard input in a private file under ``<home>/imports/`` for as long as the import
    runs (it reads its file twice: check, then write), removed afterwards. The same input
    again is the same import: its ledger is named by the content's sha256."""
    folder = home / "imports"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="stdin-", suffix=".jsonl", dir=folder)
    spool = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            _copy_bounded(sys.stdin.buffer, out)
        yield spool
    finally:
        spool.unlink(missing_ok=True)


def _import(ctx: Context, file: Path, fmt: str) -> None:
    if fmt != "tether":
        _import_transcript(ctx, file, fmt)
        return
    now = ctx.now()
    with terminal_meter() as meter:
        report = import_jsonl(
            ctx.home, file, now=now, store=ctx.store, config=ctx.config(), meter=meter
        )
        embedded = embed_added(ctx.app, meter) if report.already is None else None
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
    # A resumed run says what it wrote, not what the whole file holds.
    what = (
        f"{counted(report.records - report.resumed, 'more record')} (of the file's "
        f"{report.records}, {counted(report.turns, 'turn')})"
        if report.resumed
        else f"{counted(report.records, 'record')} ({counted(report.turns, 'turn')})"
    )
    click.echo(
        f"imported {what}: "
        f"{counted(report.sessions_created, 'session')} created, "
        f"{report.sessions_appended} appended; {counted(report.indexed_rows, 'row')} indexed"
        f"{embedded_words(embedded)}"
    )
    warn_unindexed(report.index_errors)


def _import_transcript(ctx: Context, file: Path, harness: str) -> None:
    from tether.imports.transcript import (
        import_transcript,
        skipped_words,
        transcripts_in,
    )

    paths = transcripts_in(file)
    with terminal_meter() as meter:
        report = import_transcript(
            ctx.home,
            paths,
            harness=harness,
            now=ctx.now(),
            store=ctx.store,
            config=ctx.config(),
            meter=meter,
        )
        embedded = embed_added(ctx.app, meter) if report.imported else None
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
        f"{embedded_words(embedded)}"
    )
    if skipped:
        click.echo(skipped)
    warn_unindexed(r.index_errors)


COMMANDS = [sessions_group]
