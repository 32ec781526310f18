"""``tether session list``, ``show``, ``discard`` and ``folder``.

A session's owner, discard mark and folder live in the store (``Store.session_meta``),
where the sweep reads them; a session the store does not know yet belongs to the home's
owner, is not discarded and has no folder."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from tether.cli.context import Context, counted, echo_json, pass_ctx, shown, utc_stamp
from tether.errors import BadInputError, TetherError
from tether.records import (
    Assistant,
    EpochEnd,
    SessionMeta,
    ToolCall,
    ToolResult,
    TurnError,
    User,
)
from tether.sessions import Session, list_sessions
from tether.sweep.owners import DEFAULT_OWNER


def session_json(session: Session, meta: SessionMeta | None = None) -> dict[str, Any]:
    """The public shape of ``session show --json`` (a contract: add keys, never rename)."""
    meta = meta or SessionMeta(session=session.id)
    return {
        "id": session.id,
        "epoch": session.epoch,
        "epochs": list(session.epochs),
        "turns": session.turns(),
        "untrusted": session.untrusted(),
        "carry": None if session.carry is None else _said(session.carry),
        "slot": session.slot,
        "owner": meta.owner or DEFAULT_OWNER,
        "discarded": meta.discarded_at is not None,
        "folder": meta.folder,
        "folder_by": meta.folder_by,
    }


@click.group("session")
def session_group() -> None:
    """Inspect sessions."""


@session_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def session_list(ctx: Context, as_json: bool) -> None:
    """List the sessions of the home, with epoch, turns and taint.

    A session that cannot be opened is listed with its error rather than hiding the rest.
    """
    rows: list[dict[str, Any]] = []
    for sid in list_sessions(ctx.home):
        try:
            rows.append(session_json(Session.open(ctx.home, sid)))
        except TetherError as exc:
            rows.append({"id": sid, "error": str(exc)})
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(f"no sessions in {ctx.home}")
        return
    click.echo(f"{'ID':<32} {'EPOCH':>5} {'TURNS':>6} {'SLOT':>4}  TRUST")
    for row in rows:
        if "error" in row:
            click.echo(f"{row['id']:<32} error: {row['error']}")
            continue
        trust = "untrusted" if row["untrusted"] else "trusted"
        click.echo(f"{row['id']:<32} {row['epoch']:>5} {row['turns']:>6} {row['slot']:>4}  {trust}")


def _said(text: str) -> str:
    """What was said as tether shows it: ``<private>`` spans ``[private]``, secrets
    redacted."""
    from tether.core.checkpoints.window import strip_private

    return shown(strip_private(text))


def conversation(session: Session) -> list[dict[str, Any]]:
    """What was said in the session, every epoch in order, as ``--messages`` prints it:
    the owner's and the agent's words, tool calls, what tools returned (its size and
    trust, not its text), failed turns and compactions. Text is shown secret-redacted."""
    out: list[dict[str, Any]] = []
    turn = 0  # as the index numbers turns: the k-th owner message (a retry is not one)
    for epoch, records in session.epoch_records():
        for r in records:
            time = utc_stamp(r.time)
            if isinstance(r, User):
                turn += 0 if r.retry else 1
                out.append({"epoch": epoch, "time": time, "role": "owner", "text": _said(r.text)})
            elif isinstance(r, Assistant):
                out.append({"epoch": epoch, "time": time, "role": "agent", "text": _said(r.text)})
            elif isinstance(r, ToolCall):
                args = _said(msgspec.json.encode(r.args).decode())
                out.append(
                    {"epoch": epoch, "time": time, "role": "tool_call", "text": f"{r.name} {args}"}
                )
            elif isinstance(r, ToolResult):
                trust = "untrusted" if r.untrusted else "trusted"
                said = f"{r.class_}, {trust}, {counted(len(r.content), 'char')}"
                out.append({"epoch": epoch, "time": time, "role": "tool_result", "text": said})
            elif isinstance(r, TurnError):
                out.append({"epoch": epoch, "time": time, "role": "error", "text": r.kind})
            elif isinstance(r, EpochEnd):
                said = f"compacted into epoch {r.next}"
                out.append({"epoch": epoch, "time": time, "role": "compaction", "text": said})
            else:
                continue
            out[-1]["turn"] = turn
    return out


def _turn_range(text: str) -> tuple[int, int]:
    """``N`` or ``N-M`` (a recall hit's ``session#N-M``) as (first, last)."""
    first, _, last = text.partition("-")
    if not first.isdigit() or not (last or first).isdigit() or int(last or first) < int(first):
        raise BadInputError(f"--turns: {text!r} is not a turn or a range of turns (3, or 3-9)")
    return int(first), int(last or first)


_LABELS = {"owner": "you", "agent": "agent", "tool_call": "tool", "tool_result": "result"}


@session_group.command("show")
@click.argument("session_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--messages",
    is_flag=True,
    help="Print the conversation (every epoch) instead of the summary.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --messages: only the last N entries.",
)
@click.option(
    "--turns",
    "turns_text",
    metavar="N-M",
    help="Print the conversation of turns N to M only (a recall hit's session#N-M).",
)
@pass_ctx
def session_show(
    ctx: Context,
    *,
    session_id: str,
    as_json: bool,
    messages: bool,
    last: int | None,
    turns_text: str | None,
) -> None:
    """Show one session: current epoch, epochs, turns, taint, carried summary, slot."""
    session = Session.open(ctx.home, session_id)
    if last is not None and not messages:
        raise click.UsageError("--last goes with --messages")
    if turns_text is not None or messages:
        said = conversation(session)
        if turns_text is not None:
            first, final = _turn_range(turns_text)
            said = [m for m in said if first <= m["turn"] <= final]
        if last is not None:
            said = said[-last:]
        if as_json:
            echo_json(said)
            return
        for m in said:
            head = f"{m['time']} e{m['epoch']} {_LABELS.get(m['role'], m['role']):>10}: "
            click.echo(head + m["text"].replace("\n", "\n" + " " * len(head)))
        return
    with ctx.store() as store:
        info = session_json(session, store.session_meta(session.id))
    if as_json:
        echo_json(info)
        return
    click.echo(f"session   {info['id']}")
    click.echo(f"owner     {info['owner']}{'  (discarded)' if info['discarded'] else ''}")
    if info["folder"] is not None:
        click.echo(f"folder    {info['folder']} (set by {info['folder_by']})")
    click.echo(f"epoch     {info['epoch']} (epochs: {', '.join(map(str, info['epochs']))})")
    click.echo(f"turns     {info['turns']}")
    click.echo(f"slot      {info['slot']}")
    click.echo(f"trust     {'untrusted' if info['untrusted'] else 'trusted'}")
    if info["carry"] is None:
        click.echo("carry     (none: epoch 0)")
    else:
        click.echo("carry")
        for line in info["carry"].splitlines():
            click.echo(f"  {line}")


@session_group.command("discard")
@click.argument("session_id", metavar="ID")
@click.option("--undo", is_flag=True, help="Take the discard back.")
@pass_ctx
def session_discard(ctx: Context, session_id: str, undo: bool) -> None:
    """Discard a session from the daily sweep: its days are swept without it (the log
    and its recall stay). ``--undo`` takes it back for days not yet swept."""
    from tether.sweep.marks import discard

    discard(ctx.home, ctx.store, session_id, undo=undo, time=ctx.now())
    click.echo(f"session {session_id} {'kept for' if undo else 'discarded from'} the sweep")


@session_group.command("folder")
@click.argument("session_id", metavar="ID")
@click.argument("name", metavar="NAME")
@pass_ctx
def session_folder(ctx: Context, session_id: str, name: str) -> None:
    """File a session under folder NAME (1 to 64 characters, no '/'). A folder the owner
    sets always wins: the sweep never refiles it."""
    from tether.sweep.marks import file_under

    done = file_under(ctx.home, ctx.store, session_id, name)
    click.echo(f"session {session_id} filed under {done.folder!r}")


@session_group.command("compact")
@click.argument("session_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def session_compact(ctx: Context, session_id: str, as_json: bool) -> None:
    """Compact a session now (the owner's /compact): bank its window, summarise it on the
    background slot, and start its next epoch. Waits for a turn in flight."""
    from tether.cli.backend import open_backend

    with open_backend(ctx) as backend:
        reply = backend.compact(session_id)
    if as_json:
        echo_json(reply)
        return
    where = f"; banked {reply.segment}" if reply.segment else ""
    click.echo(
        f"compacted {reply.session}: epoch {reply.from_epoch} -> {reply.to_epoch} "
        f"(summary: {reply.summary}, {reply.summary_chars} chars{where})"
    )


COMMANDS = [session_group]
