"""``tether memory ...``: search memory (``recall``, ``reindex``, ``tiers``), and the
owner's view and edits (``show``, ``journal``, ``add``, ``remove``, ``note``, ``scan``).

``memory recall`` runs the same search as the agent's ``recall`` tool, after an
incremental index pass so turns written since the last pass are found too. Its ``--json``
output is a contract: a list of ``{"kind", "session", "turn", "text", "tag", "score",
"time", "date"}`` (``time``: when what was found was written, UTC to the second;
``date``: its day; both null where the search does not say); with ``--sessions``, a list
of ``{"session", "score", "turns": [hit, ...]}``. ``--timeline`` prints the same hits
oldest first; ``--as-of DATE`` recalls as memory stood at the end of DATE (what was
written later is left out, and "last week" is the week before DATE).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click
import msgspec

from tether.cli.context import (
    Context,
    FreeTextCommand,
    counted,
    echo_change,
    echo_json,
    pass_ctx,
    redact_option,
    shown,
    utc_stamp,
)
from tether.cli.progress import terminal_meter
from tether.errors import BadInputError, TetherError
from tether.memory.identity import Identity
from tether.memory.notes import write_note
from tether.records import JournalEntry
from tether.scan.allow import ALLOW_FILE, home_allow

# What one command alone needs is imported in it, when it runs: the group is one module,
# yet `memory show` need not load recall's ranking, nor `memory recall` the secret scan
# or the tiers listing (see main.py's lazy tables).
if TYPE_CHECKING:
    from pathlib import Path

    from tether.memory.indexer import IndexReport
    from tether.memory.recall import SessionHit
    from tether.memory.secret_scan import ScanReport
    from tether.memory.vectors import Vectors
    from tether.ports import Store, SweepStore
    from tether.records import Hit

#: Characters of a hit's text on one line of human output.
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
    return doc


def hit_date(hit: Hit) -> str:
    """The UTC day a hit was written, ``2026-11-01`` (blank when the search does not say)."""
    return "" if hit.time is None else hit.time.astimezone(UTC).strftime("%Y-%m-%d")


def as_of(text: str | None) -> tuple[datetime, datetime | None]:
    """(now, until) for ``--as-of``: a day (``2026-11-01``: now is its last moment, until
    the next midnight, UTC) or a time (ISO 8601; without a zone, UTC); the clock and no
    limit without it. A bad value: BadInputError naming the option."""
    if text is None:
        return datetime.now(UTC), None
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


def warn_unindexed(
    errors: Sequence[tuple[str, str]], damaged: Sequence[tuple[str, str]] = ()
) -> None:
    """One stderr line per session an index pass had to leave out, and per malformed
    line it read past (the session's other lines are indexed)."""
    for sid, problem in errors:
        click.echo(f"tether: warning: session {sid} not indexed: {shown(problem)}", err=True)
    for sid, problem in damaged:
        click.echo(
            f"tether: warning: session {sid}: a malformed line was left out of the index: "
            f"{shown(problem)} (runbook: session-log-corrupt)",
            err=True,
        )


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
    from tether.checkpoint.recallable import Links
    from tether.memory.recall import recall, recall_sessions

    home = ctx.home
    now, until = as_of(as_of_text)
    if by_session and (timeline or until is not None):
        raise BadInputError("--sessions ranks conversations: use it without --timeline, --as-of")
    with _recall_store(ctx) as store, _vectors(ctx) as vectors:
        _catch_up_banked(ctx, best_effort=True)
        report = _catch_up(home, store)
        if by_session:
            sessions = recall_sessions(store, query, k, time=now, vectors=vectors)
        else:
            with _sweep_reader(ctx) as sweep:
                hits = recall(
                    store,
                    query,
                    k,
                    time=now,
                    home=home,
                    sweep=sweep,
                    vectors=vectors,
                    until=until,
                    in_time_order=timeline,
                )
    warn_unindexed(report.errors, report.damaged)
    if by_session:
        _print_sessions(sessions, as_json)
        return
    links = Links(home)
    segments = [links.of(h.session, h.time) for h in hits]
    if as_json:
        echo_json([hit_json(h, link) for h, link in zip(hits, segments, strict=True)])
        return
    if not hits:
        click.echo("no matches")
        return
    wheres = [f"{h.session}#{h.turn}" if h.session is not None else h.ref for h in hits]
    width = max(24, *(len(w) for w in wheres))  # imported ids (cc-<uuid>) run long
    for h, where, link in zip(hits, wheres, segments, strict=True):
        line = f"{h.tag:<14} {where:<{width}} {hit_date(h):<10} {h.score:7.2f}  {_one_line(h.text)}"
        click.echo(f"{line}  {link}" if link else line)


def _catch_up_banked(ctx: Context, *, wait: bool = False, best_effort: bool = False) -> None:
    """Put in their sessions the windows the hooks banked but had no time to (see
    ``checkpoint.recallable``), so the index pass that follows makes them recallable.
    ``best_effort`` (recall): a failure (a full disk) is a warning, and recall answers
    from what is indexed."""
    from tether.checkpoint.recallable import catch_up

    try:
        catch_up(ctx.home, allow=home_allow(ctx.home), slot=ctx.config().slots.main, wait=wait)
    except TetherError as exc:
        if not best_effort:
            raise
        click.echo(
            "tether: warning: banked windows could not be put in their sessions, recall "
            f"answers from what is indexed: {shown(str(exc))}",
            err=True,
        )


@contextlib.contextmanager
def _recall_store(ctx: Context) -> Iterator[Store]:
    """The home's store; on a disk too full to open it (SQLite cannot make its WAL
    index), the SQLite file read as it stands, with a warning: recall still answers."""
    from tether.errors import DiskFullError
    from tether.stores import open_store, sqlite_path
    from tether.stores.sqlite import SqliteStore

    config = ctx.config()
    store: Store
    try:
        store = open_store(ctx.home, config)
    except DiskFullError as exc:
        if config.store.url:
            raise
        click.echo(
            f"tether: warning: disk full: {exc.path}: recall answers from what is indexed, "
            "read as it stands (runbook: disk-full)",
            err=True,
        )
        store = SqliteStore(sqlite_path(ctx.home, config), snapshot=True)
        # Its writes (recall counts, identity in step) fail read-only: said once above.
        logging.getLogger("tether.memory").setLevel(logging.ERROR)
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def _sweep_reader(ctx: Context) -> Iterator[SweepStore | None]:
    """The sweep store for recall's facts; None when a full disk keeps it from opening
    (the facts already mirrored into the index are still found)."""
    from tether.errors import DiskFullError
    from tether.stores import open_sweep_store

    sweep: SweepStore | None
    try:
        sweep = open_sweep_store(ctx.home, ctx.config(), migrate=False)
    except DiskFullError:
        sweep = None
    try:
        yield sweep
    finally:
        if sweep is not None:
            sweep.close()


def _catch_up(home: Path, store: Store) -> IndexReport:
    """Recall's index pass first; when it fails (a full disk, an unwritable store),
    recall answers from what is indexed and says so on stderr."""
    from tether.memory.indexer import IndexReport, index_home

    try:
        return index_home(home, store)
    except TetherError as exc:
        click.echo(
            f"tether: warning: the index could not catch up, recall answers from what is "
            f"indexed: {shown(str(exc))}",
            err=True,
        )
        return IndexReport()


@contextlib.contextmanager
def _vectors(ctx: Context) -> Iterator[Vectors | None]:
    """Recall's vectors as ``[recall] vectors`` says (None: lexical); the store must be
    open first (it migrates the file)."""
    from tether.daemon.vectors import open_vectors
    from tether.errors import DiskFullError

    try:
        vectors = open_vectors(ctx.home, ctx.config())
    except DiskFullError:  # recall still answers, lexically (the store's warning said why)
        vectors = None
    try:
        yield vectors
    finally:
        if vectors is not None:
            vectors.index.close()


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
    from tether.memory.indexer import reindex

    if vectors_only:
        _reindex_vectors(ctx, as_json)
        return

    with ctx.store() as store, terminal_meter() as meter:
        _catch_up_banked(ctx, wait=True)
        report = reindex(ctx.home, store, meter=meter)
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
    from tether.daemon.vectors import open_vectors
    from tether.faults import crash_point
    from tether.llm.embedder import require_extra
    from tether.memory.indexer import index_home
    from tether.memory.vectors import embed_missing

    require_extra("tether memory reindex --vectors")
    config = ctx.config()
    with ctx.store() as store:
        report = index_home(ctx.home, store)
        vectors = open_vectors(
            ctx.home,
            msgspec.structs.replace(
                config, recall=msgspec.structs.replace(config.recall, vectors=True)
            ),
        )
        if vectors is None:
            raise BadInputError("this store has no vector index yet")
        try:
            before = vectors.counts
            with terminal_meter() as meter:
                embedded = embed_missing(
                    vectors,
                    progress=meter,
                    after_batch=lambda _n: crash_point("reindex_vectors.batch"),
                )
            after = vectors.counts
        finally:
            vectors.index.close()
    warn_unindexed(report.errors)
    if as_json:
        echo_json(
            {
                "model": vectors.model,
                "embedded": embedded,
                "had": before.done,
                "with_vectors": after.done,
                "rows": after.total,
            }
        )
        return
    click.echo(
        f"embedded {counted(embedded, 'row')} with {vectors.model}: "
        f"{after.done} of {counted(after.total, 'row')} have vectors"
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


def _now() -> datetime:
    return datetime.now(UTC)


@click.command("show")
@pass_ctx
def show_cmd(ctx: Context) -> None:
    """Identity entries (with the [id]s edits use) and notes."""
    with ctx.store() as store:
        identity = Identity(ctx.home, store)
        entries = identity.entries()
        click.echo(f"identity ({identity.path}): {counted(len(entries), 'entry', 'entries')}")
        for e in entries:
            click.echo(f"  [{e.id}] {e.text}")
        notes = store.notes()
        click.echo(f"notes: {len(notes)}")
        for n in notes:
            trust = "untrusted" if n.untrusted else "trusted"
            origin = f" from {n.session}" if n.session else ""
            click.echo(f"  {n.id:>4} {trust:<9} {n.time:%Y-%m-%d}{origin}: {n.text}")


@click.command("journal")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.option("-n", "limit", type=click.IntRange(1), default=None, help="Only the newest N.")
@pass_ctx
def journal_cmd(ctx: Context, as_json: bool, limit: int | None) -> None:
    """Every memory write, the sweep's too: when, which journal, who, before and after.

    Lines from the sweep's journal say "sweep", its owner and receipt; the others say
    "memory" and the session the write came from."""
    import msgspec

    from tether.memory.journals import merged

    with ctx.store() as store:
        entries = store.journal(limit)
    with ctx.sweep_reader() as sweep:
        rows = sweep.journal_rows(limit)
    listed = merged(entries, rows, limit)
    if as_json:
        out: list[dict[str, Any]] = []
        for e in listed:
            item = msgspec.to_builtins(e.entry)
            if e.journal == "sweep":
                item["session"] = None
                item["evidence"] = _json_or_text(item["evidence"])
            out.append({"journal": e.journal, **item})
        echo_json(out)
        return
    for e in listed:
        j = e.entry
        if isinstance(j, JournalEntry):
            where = f" session={j.session}" if j.session else ""
            click.echo(f"{utc_stamp(j.time)} memory {j.who}{where} {j.action} {j.target}")
        else:
            click.echo(
                f"{utc_stamp(j.time)} sweep  {j.who} owner={j.owner} {j.action} {j.target}"
                f"  receipt={j.receipt_id}"
            )
        echo_change(j.before, j.after)


def _json_or_text(text: str) -> Any:
    """A sweep row's evidence as ``tether sweep journal --json`` prints it: its JSON."""
    import msgspec

    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


@click.command("add", cls=FreeTextCommand)
@click.argument("text")
@redact_option
@pass_ctx
def add_cmd(ctx: Context, text: str, redact: bool) -> None:
    """Add an identity entry (lands in each session's baseline at its next epoch).

    TEXT holding a secret (an API key, a private key, a password assignment) is refused
    unless --redact is given."""
    screened = ctx.screen(text, what="identity entry", redact=redact)
    lines = [line for line in screened.text.splitlines() if line.strip()]
    if len(lines) > 1:  # an entry is one list item: joining the lines would change the text
        raise click.BadParameter(
            f"an identity entry is one line (this text has {len(lines)}); give one line, "
            "or keep longer text in a note (tether memory note) or a page (tether page write)",
            param_hint="TEXT",
        )
    with ctx.store() as store:
        e = Identity(ctx.home, store).add(screened, who="owner", session=None, time=_now())
    click.echo(f"added [{e.id}] {e.text}")


@click.command("remove")
@click.argument("ids", nargs=-1, required=True)
@pass_ctx
def remove_cmd(ctx: Context, ids: tuple[str, ...]) -> None:
    """Remove identity entries by [id] (see `tether memory show`)."""
    with ctx.store() as store:
        gone = Identity(ctx.home, store).remove(list(ids), who="owner", session=None, time=_now())
    for e in gone:
        click.echo(f"removed [{e.id}] {e.text}")


@click.command("note", cls=FreeTextCommand)
@click.argument("text")
@redact_option
@pass_ctx
def note_cmd(ctx: Context, text: str, redact: bool) -> None:
    """Write a trusted note (found by recall; the tiering job may promote it).

    TEXT holding a secret is refused unless --redact is given."""
    if not text.strip():
        raise click.BadParameter("a note needs some text", param_hint="TEXT")
    screened = ctx.screen(text, what="note", redact=redact)
    with ctx.store() as store:
        now = _now()
        note = write_note(store, screened, untrusted=False, who="owner", session=None, time=now)
    click.echo(f"wrote note {note.id}")


@click.command("scan")
@click.option(
    "--redact", "fix", is_flag=True, help="Replace each secret found with [REDACTED:<rule>]."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def scan_cmd(ctx: Context, fix: bool, as_json: bool) -> None:
    """Find secrets already in durable memory: memory.md, notes, pages, the journals,
    sweep facts, triggers and staged packets. Exit 1 while any is left in clear.

    Each is named by place, line, rule and fingerprint, never shown. --redact rewrites
    each where it sits, as [REDACTED:<rule>], and zeroes the old text in the store."""
    from tether.memory.secret_scan import scan_memory

    allow = home_allow(ctx.home)  # a broken allow file: exit 2 before anything is read
    with ctx.store() as store, ctx.sweep_reader() as sweep:
        identity = Identity(ctx.home, store)
        with terminal_meter() as meter:
            report = scan_memory(
                identity, store, allow=allow, fix=fix, time=_now(), sweep=sweep, meter=meter
            )
    if as_json:
        echo_json(
            {
                "secrets": [
                    {
                        "kind": p.kind,
                        "where": p.where,
                        "line": p.line,
                        "rule": p.rule,
                        "fingerprint": p.fingerprint,
                        "redacted": p.redacted,
                        "left": p.left,
                    }
                    for p in report.places
                ],
                "redacted": len(report.places) - report.remaining,
                "left": report.remaining,
                "log_truncated": report.log_truncated,
            }
        )
    else:
        _print_scan(ctx, report, fix)
    if report.remaining:
        raise click.exceptions.Exit(1)


def _print_scan(ctx: Context, report: ScanReport, fix: bool) -> None:
    if not report.places:
        click.echo("no secret in durable memory")
        return
    for p in report.places:
        state = ": redacted" if p.redacted else f": left ({p.left})" if p.left else ""
        click.echo(f"{p.where} line {p.line}: {p.rule}, fingerprint {p.fingerprint}{state}")
    total = counted(len(report.places), "secret", "secrets")
    allow = ctx.home / ALLOW_FILE
    if not fix:
        click.echo(
            f"{total} in durable memory. `tether memory scan --redact` replaces each with "
            f"[REDACTED:<rule>]; a reviewed false positive is allowed by its fingerprint "
            f"on a line of {allow}."
        )
        return
    click.echo(f"{len(report.places) - report.remaining} of {total} redacted.")
    if report.log_truncated is False:
        click.echo(
            "note: a reader kept the store's write-ahead log from being truncated; the old "
            "text is gone from the database but may stay in tether.db-wal until the next "
            "checkpoint (stop `tether serve` and scan again to be sure)."
        )


@click.command("tiers")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "-n",
    "limit",
    type=click.IntRange(1),
    default=None,
    help="At most N notes, the most recalled (default: [memory] tiers_notes).",
)
@click.option("--all", "every", is_flag=True, help="Every note, however many.")
@pass_ctx
def tiers_cmd(ctx: Context, as_json: bool, limit: int | None, every: bool) -> None:
    """Identity entries and the most recalled notes with how often recall found each and
    when last (what the tiering job reads); untrusted notes are marked, and a last line
    says how many notes were left out."""
    from tether.core.tiers import listing_json, render_listing
    from tether.memory.tiers import listing

    notes = None if every else (limit or ctx.config().memory.tiers_notes)
    with ctx.store() as store:
        shown = listing(ctx.home, store, notes)
    if as_json:
        echo_json(listing_json(shown))
        return
    click.echo(render_listing(shown))


MEMORY_COMMANDS = [
    recall_cmd,
    reindex_cmd,
    show_cmd,
    journal_cmd,
    add_cmd,
    remove_cmd,
    note_cmd,
    scan_cmd,
    tiers_cmd,
]
COMMANDS: list[click.Command] = []
