"""``tether owner ...`` and ``tether sweep ...``: the daily memory sweep.

Output is counts, dates, statuses and reason codes only, never memory text; so is the
telemetry line each ``sweep run`` appends to ``<home>/telemetry/sweep.jsonl`` (the
runner's, built in ``daemon.compose``).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import click
import msgspec

from tether.cli.context import Context, echo_change, echo_json, pass_ctx, utc_stamp
from tether.config import CONFIG_FILE, Config, load_config_file
from tether.core.sweep.errors import TimezoneChangedError
from tether.core.sweep.state import Fact, JournalRow, Owner
from tether.core.sweep.windows import parse_date, window_for
from tether.errors import BadInputError, NotFoundError
from tether.ports import SweepStore
from tether.sweep import owners, stuck
from tether.sweep.runner import report_json
from tether.sweep.status import (
    OwnerStatus,
    owner_facts,
    owner_journal,
    reconcile_owner,
    waits_for_reconcile,
)


def _home(ctx: Context) -> Path:
    home = ctx.home
    if not home.is_dir():
        raise NotFoundError(f"no tether home at {home}; run `tether init` first")
    return home


def sweep_store(ctx: Context) -> AbstractContextManager[SweepStore]:
    """The home's sweep store, for a home that exists (``tether init`` made it)."""
    _home(ctx)
    return ctx.sweep_store()


def owner_json(owner: Owner) -> dict[str, Any]:
    return {
        "id": owner.id,
        "timezone": owner.timezone_name,
        "account_generation": owner.account_generation,
        "source_generation": owner.source_generation,
        "receipt_namespace": owner.receipt_namespace,
        "first_date": owner.first_date.isoformat(),
        "deleted": owner.deleted_at is not None,
    }


# -- owner -----------------------------------------------------------------------------


@click.group("owner")
def owner_group() -> None:
    """Owners of memory: zone, generations, deletion."""


@owner_group.command("add")
@click.argument("owner_id", metavar="ID")
@click.option("--tz", "tz", required=True, metavar="ZONE", help="IANA zone, e.g. Europe/Paris.")
@pass_ctx
def owner_add(ctx: Context, owner_id: str, tz: str) -> None:
    """Add an owner; the sweep starts with the local day before today."""
    with sweep_store(ctx) as store:
        owners.ensure_default(store, ctx.now())
        row = owners.add(store, owners.owner_id(owner_id), tz, ctx.now())
    click.echo(f"added owner {row.id} ({row.timezone_name}); first day {row.first_date}")


@owner_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def owner_list(ctx: Context, as_json: bool) -> None:
    """List owners (deleted ones stay listed: their ids are never reused)."""
    with sweep_store(ctx) as store:
        owners.ensure_default(store, ctx.now())
        rows = [owner_json(o) for o in owners.listing(store)]
    if as_json:
        echo_json(rows)
        return
    click.echo(f"{'ID':<24} {'ZONE':<28} {'GEN':>7}  STATE")
    for r in rows:
        gen = f"{r['account_generation']}/{r['source_generation']}"
        state = "deleted" if r["deleted"] else "active"
        click.echo(f"{r['id']:<24} {r['timezone']:<28} {gen:>7}  {state}")


@owner_group.command("set-tz")
@click.argument("owner_id", metavar="ID")
@click.argument("tz", metavar="ZONE")
@pass_ctx
def owner_set_tz(ctx: Context, owner_id: str, tz: str) -> None:
    """Change an owner's zone (after a completed day, `sweep reconcile` must follow)."""
    with sweep_store(ctx) as store:
        row = owners.set_timezone(store, owners.owner_id(owner_id), tz)
        waits = waits_for_reconcile(store, row)
    click.echo(f"owner {row.id} now in {row.timezone_name}")
    if waits:
        click.echo(f"the sweep waits for `tether sweep reconcile {row.id}`")


@owner_group.command("delete")
@click.argument("owner_id", metavar="ID")
@pass_ctx
def owner_delete(ctx: Context, owner_id: str) -> None:
    """Mark an owner deleted, then wipe their memory, receipts and cursor."""
    with sweep_store(ctx) as store:
        done = owners.delete(store, owners.owner_id(owner_id), ctx.now())
    click.echo(f"deleted owner {done.owner}: {done.rows_wiped} rows wiped")


# -- sweep -----------------------------------------------------------------------------


@click.group("sweep")
def sweep_group() -> None:
    """The daily memory sweep."""


@sweep_group.command("run")
@click.option("--owner", "owner_ids", multiple=True, metavar="O", help="Only this owner.")
@click.option("--date", "dates", multiple=True, metavar="D", help="Only this local date.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def sweep_run(
    ctx: Context, owner_ids: tuple[str, ...], dates: tuple[str, ...], as_json: bool
) -> None:
    """Sweep completed local days (at most three per owner), then report."""
    # Here, not at the top: the composition root pulls in the agent and its clients.
    from tether.daemon.compose import run_sweep

    parsed = tuple(parse_date(d) for d in dates)
    chosen = [owners.owner_id(o) for o in owner_ids] or None
    report = run_sweep(_home(ctx), ctx.config(), ctx.now(), chosen, parsed)
    if as_json:
        echo_json(report_json(report))
    else:
        _print_report(report)
    if report.failed:
        raise click.exceptions.Exit(1)


def _print_report(report: Any) -> None:
    if report.status != "ran":
        click.echo(f"sweep {report.status} ({report.reason}): nothing written")
        return
    for o in report.owners:
        days = (
            ", ".join(
                f"{d.local_date} {d.status}" + (f" ({d.reason})" if d.reason else "")
                for d in o.days
            )
            or "no due days"
        )
        why = f" ({o.reason})" if o.reason else ""
        click.echo(f"{o.owner}: {o.status}{why}; {days}")
        if o.reason == "timezone_changed_requires_reconciliation":
            click.echo(f"  runbook: {TimezoneChangedError.runbook}")
        for d, reason in o.refused_dates:
            click.echo(f"  {d} not swept ({reason})")
    t = report.totals()
    redacted = f", {t['redacted']} secrets redacted" if t["redacted"] else ""
    click.echo(
        f"{t['days_complete']} days complete, {t['candidates']} candidates, "
        f"{t['writes']} writes{redacted}"
    )


@sweep_group.command("worker")
@click.option("--once", is_flag=True, help="Sweep until no owner-day is left, then exit.")
@click.option("--url", default=None, help="The PostgreSQL store (default: [store] url).")
@click.option(
    "--lease", "lease_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
    help="Seconds a claimed owner-day is this worker's before another may take it over.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    metavar="FILE", help="A tether.toml for [llm] and [sweep] (default: the home's, if any).",
)  # fmt: skip
@pass_ctx
def worker_cmd(
    ctx: Context,
    *,
    once: bool,
    url: str | None,
    lease_s: float,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Sweep the owner-days of every owner in a shared PostgreSQL store, beside other
    workers (each day claimed by one, taken over after its lease if that one dies)."""
    import signal
    import socket
    import uuid
    from datetime import timedelta

    from tether.daemon.app import App
    from tether.daemon.fleet import run_worker
    from tether.sweep.worker import Stop

    config = _worker_config(ctx, config_file, url_given=url is not None)
    if url is None:
        url = config.store.url
    if not url.startswith(("postgresql://", "postgres://")):
        raise BadInputError("the sweep worker needs a PostgreSQL store: --url postgresql://...")
    claimant = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    stop = Stop()  # SIGTERM / SIGINT: hand back what this worker holds, then exit 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    with App(ctx.home, config, clock=ctx.clock) as app:  # the worker's config, not the home's
        report = run_worker(
            app, url, claimant=claimant, once=once, lease=timedelta(seconds=lease_s), stop=stop
        )
    if as_json:
        echo_json(msgspec.to_builtins(report))
    else:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items())) or "none"
        click.echo(
            f"claimed {report.claimed} owner-days ({outcomes}); taken over {report.taken_over}"
        )
        if report.errors:
            causes = ", ".join(f"{k} {v}" for k, v in sorted(report.errors.items()))
            click.echo(f"errors: {causes} (each logged; its day handed back)")
        if report.stopped:
            click.echo(f"stopped: {report.handed_back} owner-days handed back")


def _worker_config(ctx: Context, path: Path | None, *, url_given: bool) -> Config:
    """The worker's config: ``--config FILE``; else the home's (which must exist when it
    is also where the store's url comes from); else, with ``--url`` and no home, the
    defaults."""
    if path is not None:
        return load_config_file(path)
    if not url_given or (ctx.home / CONFIG_FILE).is_file():
        return ctx.config()
    return Config()


@sweep_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def sweep_status(ctx: Context, as_json: bool) -> None:
    """Switches, and per owner: zone, cursor, receipts, facts, and each stuck day (a
    model invocation busy, stalled, abandoned or failed) with its holder and lease."""
    from tether.sweep.status import status

    config = ctx.config().sweep
    with sweep_store(ctx) as store:
        done = status(ctx.home, config, store)
    if as_json:
        echo_json(
            {
                "enabled": done.enabled,
                "kill_switch": done.kill_switch,
                "open": done.open,
                "owners": [_owner_status_json(o) for o in done.owners],
            }
        )
        return
    click.echo(f"sweep {done.state}")
    for o in done.owners:
        day = o.cursor.local_date.isoformat() if o.cursor else "-"
        flag = "  needs reconcile" if o.needs_reconciliation else ""
        click.echo(
            f"{o.owner.id:<24} {o.owner.timezone_name:<24} done to {day}  pending "
            f"{o.receipts_pending}  facts {o.facts}"
            f"{' deleted' if o.owner.deleted_at is not None else ''}{flag}"
        )
        for row in o.stuck:
            click.echo(stuck.describe(row))


def _owner_status_json(status: OwnerStatus) -> dict[str, Any]:
    cur = status.cursor
    return {
        **owner_json(status.owner),
        "cursor": None
        if cur is None
        else {
            "local_date": cur.local_date.isoformat(),
            "timezone": cur.timezone_name,
            "window_id": cur.window_id,
            "start_utc": cur.window_start_utc.isoformat(),
            "end_utc": cur.window_end_utc.isoformat(),
        },
        "needs_reconciliation": status.needs_reconciliation,
        "receipts_pending": status.receipts_pending,
        "receipts_committed": status.receipts_committed,
        "facts": status.facts,
        "stuck": [msgspec.to_builtins(row) for row in status.stuck],
    }


def _json_field(text: str) -> Any:
    """A JSON-encoded column (refs, evidence) as its value; kept as text if it is not."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


def fact_json(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "subject": fact.subject,
        "entity": fact.entity,
        "text": fact.text,
        "authority": fact.authority,
        "refs": _json_field(fact.refs),
        "origin_receipt": fact.origin_receipt,
        "created_at": utc_stamp(fact.created_at),
        "updated_at": utc_stamp(fact.updated_at),
        "active": fact.active,
        "visibility": fact.visibility,
    }


def journal_row_json(row: JournalRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "owner": row.owner,
        "receipt_id": row.receipt_id,
        "time": utc_stamp(row.time),
        "who": row.who,
        "action": row.action,
        "target": row.target,
        "before": row.before,
        "after": row.after,
        "evidence": _json_field(row.evidence),
    }


@sweep_group.command("facts")
@click.argument("owner_id", metavar="OWNER")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def sweep_facts(ctx: Context, owner_id: str, as_json: bool) -> None:
    """The canonical facts the sweep holds for OWNER (recall finds the active ones)."""
    with sweep_store(ctx) as store:
        owner, facts = owner_facts(store, owners.owner_id(owner_id))
    if as_json:
        echo_json([fact_json(f) for f in facts])
        return
    if not facts:
        gone = " (deleted owner: wiped)" if owner.deleted_at is not None else ""
        click.echo(f"owner {owner.id}: no facts{gone}")
        return
    for f in facts:
        state = ("" if f.active else "  (inactive)") + (
            "  (world)" if f.visibility == "world" else ""
        )
        click.echo(
            f"{f.id:>5} {f.subject}/{f.entity:<20} {f.authority:<25} "
            f"{utc_stamp(f.updated_at)}  {f.text}{state}"
        )


@sweep_group.command("journal")
@click.argument("owner_id", metavar="OWNER")
@click.option("-n", "limit", type=click.IntRange(1), default=None, help="Only the newest N.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def sweep_journal(ctx: Context, owner_id: str, limit: int | None, as_json: bool) -> None:
    """Every canonical write the sweep made for OWNER, oldest first, with its provenance."""
    with sweep_store(ctx) as store:
        owner, rows = owner_journal(store, owners.owner_id(owner_id))
    if limit is not None:
        rows = rows[-limit:]
    if as_json:
        echo_json([journal_row_json(j) for j in rows])
        return
    if not rows:
        click.echo(f"owner {owner.id}: no sweep writes")
        return
    for j in rows:
        click.echo(f"{utc_stamp(j.time)} {j.who} {j.action} {j.target}  receipt={j.receipt_id}")
        echo_change(j.before, j.after)
        click.echo(f"    evidence: {j.evidence}")


@sweep_group.command("reconcile")
@click.argument("owner_id", metavar="OWNER")
@click.option(
    "--date", "day", default=None, metavar="D",
    help="Only this local date's stuck model invocation (the zone is left alone).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def sweep_reconcile(ctx: Context, owner_id: str, day: str | None, as_json: bool) -> None:
    """Accept an owner's new zone (a new receipt namespace, the completed day kept), and
    re-open the owner's days whose model invocation was abandoned or failed (one new
    invocation each, by the next run); a day a live run holds is left. Exit 1 when a
    stuck day had to be left."""
    only = None if day is None else parse_date(day)
    oid = owners.owner_id(owner_id)
    with sweep_store(ctx) as store:
        done = reconcile_owner(ctx.home, store, oid, ctx.now(), only)
    zone, days, left = done.zone, done.days, done.left
    if as_json:
        echo_json(
            {
                "owner": oid,
                "timezone": None if zone is None else msgspec.to_builtins(zone),
                "days": [msgspec.to_builtins(d) for d in days],
            }
        )
    else:
        if zone is not None and zone.status != "nothing_to_reconcile":
            click.echo(
                f"owner {zone.owner}: reconciled to {zone.timezone_name} after"
                f" {zone.anchor_date} (receipt namespace {zone.namespace})"
            )
        for d in days:
            if d.action == "reopened":
                click.echo(f"owner {oid}: {d.local_date} re-opened ({d.why}): the next run"
                           " makes one new invocation")  # fmt: skip
            else:
                click.echo(f"owner {oid}: {d.local_date} left ({d.why}; see `tether sweep status`)")
        if not days and (zone is None or zone.status == "nothing_to_reconcile"):
            click.echo(f"owner {oid}: nothing to reconcile")
    if left:
        raise click.exceptions.Exit(1)


@sweep_group.command("window")
@click.option("--tz", "tz", required=True, metavar="ZONE")
@click.option("--date", "day", required=True, metavar="D")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def sweep_window(tz: str, day: str, as_json: bool) -> None:
    """The exact half-open UTC window of a local date in a zone."""
    w = window_for(tz, parse_date(day))
    doc = {
        "window_id": w.window_id,
        "start_utc": utc_stamp(w.start_utc),
        "end_utc": utc_stamp(w.end_utc),
        "hours": w.hours,
    }
    if as_json:
        echo_json(doc)
    else:
        click.echo(f"{day} in {tz}: [{doc['start_utc']}, {doc['end_utc']}) {w.hours:g} h")


COMMANDS = [owner_group, sweep_group]
