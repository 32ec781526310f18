"""``tether usage``: what the model calls cost, from the logs' Usage records and the
budget gate's ledger."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from tether.cli.context import Context, echo_json, pass_ctx


@click.command("usage")
@click.option("--since", metavar="DATE", help="First local day counted (YYYY-MM-DD); default: all.")
@click.option(
    "--by",
    type=click.Choice(["kind", "day", "session"]),
    default="kind",
    show_default=True,
    help="One line per job kind, local day or session.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def usage_cmd(ctx: Context, since: str | None, by: str, as_json: bool) -> None:
    """Tokens and estimated cost of model calls per job kind, day or session, with the main
    slot's cache hit share.

    Turns (live, heartbeat, cron) are summed from the session logs' Usage records; compaction
    and tool-output summaries from the budget gate's ledger, which also counts the calls
    [budget] refused; the harvest's and the sweep's extraction calls also from
    telemetry/model_calls.jsonl (every call, ok or failed: the failed column). Days are the
    owner's local days; cost uses [budget] usd_per_mtok_*.
    """
    from tether.core.sweep.windows import parse_date
    from tether.usage.report import usage

    first = parse_date(since) if since is not None else None
    config = ctx.config()
    with ctx.sweep_reader() as sweep, ctx.store() as store:
        found = usage(
            ctx.home,
            config,
            store,
            sweep,
            by=by,  # type: ignore[arg-type]  # click.Choice checked it
            since=first,
        )
    zone_name, done = found.zone, found.report
    if as_json:
        echo_json(
            {
                "by": by,
                "since": first.isoformat() if first else None,
                "zone": zone_name,
                "rows": [dataclasses.asdict(line) for line in done.lines],
                "total": dataclasses.asdict(done.total),
                "main_cache_hit_share": done.main_cache_hit_share,
            }
        )
        return
    head = f"since {first.isoformat()}" if first else "all days"
    click.echo(f"usage by {by}, {head} (local days in {zone_name})")
    width = max([len(by), 5, *(len(line.key) for line in done.lines)])
    click.echo(
        f"{by:<{width}} {'calls':>7} {'prompt_n':>11} {'cache_n':>11} {'predicted_n':>11}"
        f" {'usd':>10} {'refused':>7} {'failed':>6}"
    )
    for line in [*done.lines, done.total]:
        click.echo(_row(dataclasses.asdict(line), width))
    share = done.main_cache_hit_share
    shown = "n/a (no main-slot turns)" if share is None else f"{share:.1%}"
    click.echo(f"main-slot cache hit share: {shown}")


def _row(line: dict[str, Any], width: int) -> str:
    return (
        f"{line['key']:<{width}} {line['calls']:>7} {line['prompt_n']:>11} {line['cache_n']:>11}"
        f" {line['predicted_n']:>11} {line['usd']:>10.4f} {line['refused']:>7}"
        f" {line['failed']:>6}"
    )


COMMANDS = [usage_cmd]
