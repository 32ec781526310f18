"""``tether memory recall`` and ``tether memory reindex``: search memory, and rebuild
its index.

``memory recall`` runs the same search as the agent's ``recall`` tool, after an
incremental index pass so turns written since the last pass are found too (and, first,
the windows the checkpoint hooks banked but had no time to put in their sessions). Its
``--json`` output is a contract: a list of ``{"kind", "session", "turn", "text", "tag",
"score", "time", "date"}`` (plus ``"link"`` for a hit from a window the hooks banked;
a summary unit, kind ``session-summary`` or ``epoch-summary`` with ``turn`` null, adds
``"first_turn"``, ``"last_turn"``, ``"epoch"``, ``"first_time"`` and ``"first_date"``: the
turns it covers, which ``tether session show ID --turns FIRST-LAST`` opens;
``time``: when what was found was written, UTC to the second; ``date``: its day; both
null where the search does not say); with ``--sessions``, a list of ``{"session",
"score", "turns": [hit, ...]}``. ``--timeline`` prints the same hits oldest first;
``--as-of DATE`` recalls as memory stood at the end of DATE (what was written later is
left out, and "last week" is the week before DATE). When the index cannot catch up (a
full disk), recall answers from what is indexed and says so. With vectors on, rows still
without a vector are embedded first when they are few (``memory.readiness``, the rule MCP
and the ui share), else recall is lexical and says so on stderr.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from tether.cli.context import (
    Context,
    FreeTextCommand,
    counted,
    echo_json,
    pass_ctx,
    shown,
    utc_stamp,
)
from tether.cli.indexing import warn_unindexed
from tether.cli.progress import terminal_meter
from tether.errors import BadInputError

# Each command imports what it alone needs when it runs (see main.py's lazy tables).
if TYPE_CHECKING:
    from tether.memory.recall import SessionHit
    from tether.memory.vectors import Vectors
    from tether.ports import Store, SweepStore
    from tether.recall.home import CatchUp
    from tether.records import Hit

TEXT_CHARS = 120


def hit_json(hit: Hit, link: str | None = None) -> dict[str, Any]:
    """The public shape of one ``memory recall --json`` hit (add keys, never rename);
    ``link``: the banked window of a harness session's hit (``tether://corpus/...``)."""
    doc: dict[str, Any] = {
        "kind": hit.kind,
        "session": hit.session,
        "turn": hit.turn,
        "text": hit.text,
        "tag": hit.tag,
        "score": round(hit.score, 4),
        "time": None if hit.time is None else utc_stamp(hit.time),
        "date": None if hit.time is None else hit_date(hit),
    }
    if link is not None:
        doc["link"] = link
    if hit.first_turn is not None:  # a summary unit: the range a caller opens
        doc["first_turn"] = hit.first_turn
        doc["last_turn"] = hit.last_turn
        doc["epoch"] = hit.epoch
        first = hit.first_time
        doc["first_time"] = None if first is None else utc_stamp(first)
        doc["first_date"] = None if first is None else first.astimezone(UTC).strftime("%Y-%m-%d")
    return doc


def hit_date(hit: Hit) -> str:
    """The UTC day a hit was written, ``2026-11-01`` (blank when the search does not say)."""
    return "" if hit.time is None else hit.time.astimezone(UTC).strftime("%Y-%m-%d")


def as_of(text: str | None, now: datetime) -> tuple[datetime, datetime | None]:
    """(now, until) for ``--as-of``: a day (``2026-11-01``: now is its last moment, until
    the next midnight, UTC) or a time (ISO 8601; without a zone, UTC); ``now`` (the
    command's clock) and no limit without it. A bad value: BadInputError naming the option."""
    if text is None:
        return now, None
    try:
        if len(text) == 10:
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            until = day + timedelta(days=1)
            return until - timedelta(microseconds=1), until
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInputError(
            f"--as-of: {text!r} is not a date (2026-11-01) or a time (2026-11-01T12:00:00Z)"
        ) from None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return moment, moment


def session_json(found: SessionHit) -> dict[str, Any]:
    """The public shape of one ``memory recall --sessions --json`` session."""
    return {
        "session": found.session,
        "score": round(found.score, 4),
        "turns": [hit_json(h) for h in found.turns],
    }


def _where(hit: Hit) -> str:
    """Where a hit is: ``session#turn``, ``session#first-last`` for a summary unit (what
    ``tether session show ID --turns first-last`` opens), else its ref."""
    if hit.first_turn is not None:
        return f"{hit.session}#{hit.first_turn}-{hit.last_turn}"
    return f"{hit.session}#{hit.turn}" if hit.session is not None else hit.ref


def _one_line(text: str, width: int = TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command("recall", cls=FreeTextCommand)
@click.argument("query")
@click.option("-k", "k", type=int, default=5, show_default=True, help="Hits to return.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of hits.")
@click.option(
    "--sessions",
    "by_session",
    is_flag=True,
    help="Rank whole conversations: the K sessions that best answer QUERY.",
)
@click.option("--timeline", is_flag=True, help="Show the hits found in time order, oldest first.")
@click.option(
    "--as-of",
    "as_of_text",
    metavar="DATE",
    help="Recall as memory stood at the end of DATE (2026-11-01, or an ISO time): later"
    ' writing left out, "last week" read from DATE.',
)
@pass_ctx
def recall_cmd(
    ctx: Context,
    *,
    query: str,
    k: int,
    as_json: bool,
    by_session: bool,
    timeline: bool,
    as_of_text: str | None,
) -> None:
    """Search memory (every epoch of every session, notes, pages, identity, facts)."""
    from tether.memory.recall import recall_sessions
    from tether.recall.home import find, prepare

    home = ctx.home
    now, until = as_of(as_of_text, ctx.now())
    if by_session and (timeline or until is not None):
        raise BadInputError("--sessions ranks conversations: use it without --timeline, --as-of")
    with _recall_store(ctx) as store, _vectors(ctx) as vectors:
        with terminal_meter() as meter:  # a few rows embedded first, or a warning
            prepared = prepare(home, store, vectors, slot=ctx.config().slots.main, progress=meter)
        caught = prepared.caught
        _warn_caught(caught, prepared.ready.notice)
        if by_session:
            sessions = recall_sessions(store, query, k, time=now, vectors=vectors)
        else:
            with _sweep_reader(ctx) as sweep:
                found = find(
                    home,
                    store,
                    query,
                    k,
                    sweep=sweep,
                    vectors=vectors,
                    time=now,
                    until=until,
                    in_time_order=timeline,
                )
    warn_unindexed(caught.index.errors, caught.index.damaged, caught.index.rewritten)
    if by_session:
        _print_sessions(sessions, as_json)
        return
    hits = [f.hit for f in found]
    segments = [f.link for f in found]
    if as_json:
        echo_json([hit_json(h, link) for h, link in zip(hits, segments, strict=True)])
        return
    if not hits:
        click.echo("no matches")
        return
    wheres = [_where(h) for h in hits]
    width = max(24, *(len(w) for w in wheres))  # imported ids (cc-<uuid>) run long
    for h, where, link in zip(hits, wheres, segments, strict=True):
        line = f"{h.tag:<14} {where:<{width}} {hit_date(h):<10} {h.score:7.2f}  {_one_line(h.text)}"
        click.echo(f"{line}  {link}" if link else line)


def _warn_caught(caught: CatchUp, lexical: str | None) -> None:
    """What the catch-up before recall could not do, one stderr line each: recall answers
    from what is indexed; and why it searches by words only (vectors on)."""
    for what, error in caught.failures():
        click.echo(f"tether: warning: {what}: {shown(str(error))}", err=True)
    if lexical is not None:
        click.echo(f"tether: warning: {shown(lexical)}", err=True)


@contextlib.contextmanager
def _recall_store(ctx: Context) -> Iterator[Store]:
    """The home's store (the application's: closed when the command ends); on a disk too
    full to open it (SQLite cannot make its WAL index), the SQLite file read as it stands,
    with a warning: recall still answers."""
    from tether.errors import DiskFullError

    config = ctx.config()
    try:
        store = ctx.app.store()
    except DiskFullError as exc:
        if config.store.url:
            raise
        click.echo(
            f"tether: warning: disk full: {exc.path}: recall answers from what is indexed, "
            "read as it stands (runbook: disk-full)",
            err=True,
        )
        # Its writes (recall counts, identity in step) fail read-only: said once above.
        logging.getLogger("tether.memory").setLevel(logging.ERROR)
        yield ctx.app.snapshot()  # the application's: closed when the command ends
        return
    yield store


@contextlib.contextmanager
def _sweep_reader(ctx: Context) -> Iterator[SweepStore | None]:
    """The sweep store for recall's facts (the application's); None when a full disk
    keeps it from opening (the facts already mirrored into the index are still found)."""
    from tether.errors import DiskFullError

    sweep: SweepStore | None
    try:
        sweep = ctx.app.sweep(migrate=False)
    except DiskFullError:
        sweep = None
    yield sweep


@contextlib.contextmanager
def _vectors(ctx: Context) -> Iterator[Vectors | None]:
    """Recall's vectors as ``[recall] vectors`` says (None: lexical); the store must be
    open first (it migrates the file)."""
    from tether.errors import DiskFullError

    try:
        vectors = ctx.vectors()  # the application's: closed when the command ends
    except DiskFullError:  # recall still answers, lexically (the store's warning said why)
        vectors = None
    yield vectors


@click.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--vectors",
    "vectors_only",
    is_flag=True,
    help="Embed the rows that have no vector yet (resumable); the index is not dropped.",
)
@pass_ctx
def reindex_cmd(ctx: Context, as_json: bool, vectors_only: bool) -> None:
    """Drop the index of session logs and build it again from the files.

    For a log that was edited or restored by hand (recall then warns that it is shorter
    than what was indexed). Notes, pages, identity, facts, the journal and recall counts
    are kept. A session that cannot be read is reported and left out; exit 1 then.
    With --vectors: bring the index up to date, then embed every row without a vector
    from the current model (after a model change, all of them); a killed run resumes.
    """
    from tether.recall.home import rebuild

    if vectors_only:
        _reindex_vectors(ctx, as_json)
        return

    with ctx.store() as store, terminal_meter() as meter:
        report = rebuild(ctx.home, store, slot=ctx.config().slots.main, meter=meter)
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
        # With a session left out, say how many of them were reindexed, not all of them.
        done = report.sessions - len(report.errors)
        of = f"{done} of " if report.errors else ""
        left = f"; {len(report.errors)} could not be read" if report.errors else ""
        click.echo(
            f"reindexed {of}{counted(report.sessions, 'session')} "
            f"({counted(report.files, 'log')}): {counted(report.rows, 'row')}{left}"
        )
        warn_unindexed(report.errors, report.damaged)
    if report.errors:
        click.get_current_context().exit(1)


def _reindex_vectors(ctx: Context, as_json: bool) -> None:
    from tether.llm.embedder import require_extra
    from tether.recall.home import embed_all

    require_extra("tether memory reindex --vectors")
    with ctx.store() as store, terminal_meter() as meter:
        done = embed_all(ctx.home, store, lambda: ctx.app.vectors(required=True), progress=meter)
    warn_unindexed(done.index.errors)
    if as_json:
        echo_json(
            {
                "model": done.model,
                "embedded": done.embedded,
                "had": done.before.done,
                "with_vectors": done.after.done,
                "rows": done.after.total,
            }
        )
        return
    click.echo(
        f"embedded {counted(done.embedded, 'row')} with {done.model}: "
        f"{done.after.done} of {counted(done.after.total, 'row')} have vectors"
    )


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


MEMORY_COMMANDS = [recall_cmd, reindex_cmd]
COMMANDS: list[click.Command] = []
