"""``tether memory ...``: the owner's view and edits of memory (``show``, ``journal``,
``add``, ``remove``, ``note``, ``scan``) and the tiering listing (``tiers``). Searching
memory (``recall``) and rebuilding its index (``reindex``) are in ``commands_recall``.
"""

from __future__ import annotations

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
    utc_stamp,
)
from tether.cli.progress import terminal_meter
from tether.memory.identity import Identity, entry_lines
from tether.memory.notes import write_note
from tether.records import JournalEntry
from tether.scan.allow import ALLOW_FILE, home_allow

# What one command alone needs is imported in it, when it runs: the group is one module,
# yet `memory show` need not load recall's ranking, nor `memory recall` the secret scan
# or the tiers listing (see main.py's lazy tables).
if TYPE_CHECKING:
    from tether.memory.secret_scan import ScanReport

#: Characters of a hit's text on one line of human output.


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
    lines = entry_lines(screened.text)
    if lines > 1:
        raise click.BadParameter(
            f"an identity entry is one line (this text has {lines}); give one line, "
            "or keep longer text in a note (tether memory note) or a page (tether page write)",
            param_hint="TEXT",
        )
    with ctx.store() as store:
        e = Identity(ctx.home, store).add(screened, who="owner", session=None, time=ctx.now())
    click.echo(f"added [{e.id}] {e.text}")


@click.command("remove")
@click.argument("ids", nargs=-1, required=True)
@pass_ctx
def remove_cmd(ctx: Context, ids: tuple[str, ...]) -> None:
    """Remove identity entries by [id] (see `tether memory show`)."""
    with ctx.store() as store:
        identity = Identity(ctx.home, store)
        gone = identity.remove(list(ids), who="owner", session=None, time=ctx.now())
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
        now = ctx.now()
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
                identity, store, allow=allow, fix=fix, time=ctx.now(), sweep=sweep, meter=meter
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
    from tether.core.context.tier_rules import listing_json, render_listing
    from tether.memory.tiers import listing

    notes = None if every else (limit or ctx.config().memory.tiers_notes)
    with ctx.store() as store:
        shown = listing(ctx.home, store, notes)
    if as_json:
        echo_json(listing_json(shown))
        return
    click.echo(render_listing(shown))


MEMORY_COMMANDS = [
    show_cmd,
    journal_cmd,
    add_cmd,
    remove_cmd,
    note_cmd,
    scan_cmd,
    tiers_cmd,
]
COMMANDS: list[click.Command] = []
