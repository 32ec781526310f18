"""``tether jobs list|check``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from tether.cli.context import Context, echo_json, pass_ctx, utc_stamp
from tether.scheduler.jobs import jobs_dir, load_jobs


def _iso(time: datetime | None) -> str | None:
    return None if time is None else utc_stamp(time)


@click.group("jobs")
def jobs_group() -> None:
    """Cron jobs: <home>/jobs/<name>.toml, run by `tether serve`."""


@jobs_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def jobs_list(ctx: Context, as_json: bool) -> None:
    """Each job with its schedule, next run (UTC) and last run from jobs/runs.jsonl.

    An invalid file is listed with its error (the daemon would refuse to start).
    """
    from tether.scheduler.listing import job_listing

    home = ctx.home
    rows: list[dict[str, Any]] = []
    for job in job_listing(home, ctx.now()):
        if job.error is not None:
            rows.append({"name": job.name, "path": str(job.path), "error": job.error})
            continue
        run = job.last_run
        rows.append(
            {
                "name": job.name,
                "path": str(job.path),
                "schedule": job.schedule,
                "next_run": _iso(job.next_run),
                "last_run": None
                if run is None
                else {"time": _iso(run.time), "session": run.session, "status": run.status},
            }
        )
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(f"no jobs in {jobs_dir(home)}")
        return
    click.echo(f"{'NAME':<20} {'SCHEDULE':<16} {'NEXT RUN (UTC)':<21} LAST RUN")
    for row in rows:
        if "error" in row:
            click.echo(f"{row['name']:<20} invalid: {row['error']}")
            continue
        run = row["last_run"]
        last_text = "never" if run is None else f"{run['status']} {run['time']} {run['session']}"
        click.echo(
            f"{row['name']:<20} {row['schedule']:<16} {row['next_run'] or 'never':<21} {last_text}"
        )


@jobs_group.command("check")
@pass_ctx
def jobs_check(ctx: Context) -> None:
    """Validate every job file as `tether serve` does at start: exit 2 naming the first
    invalid file."""
    jobs = load_jobs(ctx.home)
    names = ", ".join(f"{j.name} ({j.schedule.text})" for j in jobs)
    click.echo(f"ok: {len(jobs)} job(s) in {jobs_dir(ctx.home)}" + (f": {names}" if jobs else ""))


COMMANDS = [jobs_group]
