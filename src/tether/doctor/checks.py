"""``tether doctor`` as one use case: the backend's probe (``doctor.probe``), then the
home, the store and the logs (``doctor.integrity``), the budget's refusals today, why recall
is lexical, and the hooks' error rate; one ``Report``, which the command prints.

Order matters: a lost WAL is looked for before anything opens the store (opening hides
it), and the home is made private before SQLite makes files beside the store.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from tether.daemon.app import App
from tether.doctor.integrity import (
    session_problems,
    store_problems,
    torn_tail_warnings,
    wal_problems,
    wal_warnings,
)
from tether.doctor.probe import Check, Report, diagnose
from tether.errors import TetherError
from tether.scan.urls import shown_url


def examine(app: App) -> Report:
    """Every check of ``tether doctor`` on the home of ``app`` (its clock: the hooks' and
    the budget's day; its stores, each opened once, by it); ``Report.ok`` is False when
    the backend is unusable or anything is damaged."""
    home, config, now = app.home, app.config, app.now()
    lost = wal_problems(home, config)  # before anything opens the store
    report = asyncio.run(diagnose(config))
    report.problems += lost
    report.checks.append(_private_home(home))  # before SQLite makes files beside the store
    report.problems += store_problems(home, config)
    report.problems += session_problems(home)
    report.warnings += torn_tail_warnings(home)
    report.warnings += wal_warnings(home, config)
    report.checks.append(_store(app, report))
    report.warnings.extend(_budget_warnings(app, now))
    report.warnings.extend(_recall_warnings(app))
    hooks, warning = _hooks(home, now)
    report.checks.append(hooks)
    if warning:
        report.warnings.append(warning)
    return report


def _store(app: App, report: Report) -> Check:
    """The store's backend, server version and migration level (``report.store``)."""
    import msgspec

    try:
        info = app.store_info()
    except TetherError as exc:
        return Check("store", False, str(exc))
    report.store = msgspec.to_builtins(info)
    owner = f", owner {info.owner}" if info.owner else ""
    return Check(
        "store",
        True,
        f"{info.backend} {shown_url(info.where)}{owner}: server {info.server_version},"
        f" schema level {info.level} of {info.known}",
    )


def _private_home(home: Path) -> Check:
    """The home is the owner's alone; one made before tether saw to it is fixed here."""
    from tether.home import tighten

    fixed = tighten(home)
    done = f"made {fixed} path{'s' if fixed != 1 else ''} private" if fixed else "private"
    return Check("home", True, f"{home}: {done} (folders 0700, files 0600)")


def _budget_warnings(app: App, now: datetime) -> list[str]:
    """A line per job kind and reason the budget gate refused today (the owner's day)."""
    from zoneinfo import ZoneInfo

    from tether.agent.budget import hits
    from tether.core.spend.budget_rules import local_day
    from tether.sweep.owners import home_zone

    try:
        zone = home_zone(app.sweep(migrate=False))
        day = local_day(ZoneInfo(zone), now).isoformat()
        found = hits(app.store().budget_rows(day), day)
    except TetherError as exc:
        return [f"budget: the spend ledger cannot be read ({exc})"]
    return [
        f"budget: {kind} hit its budget today ({reason}, {n} call(s) refused; `tether usage`)"
        for (kind, reason), n in sorted(found.items())
    ]


def _recall_warnings(app: App) -> list[str]:
    """One line when recall is lexical (the extra absent, vectors off or incomplete)."""
    from tether.daemon.vectors import lexical_reason

    try:
        app.store()  # opened (and migrated) first, as the daemon does
        reason = lexical_reason(app.config, app.vectors)
    except TetherError as exc:
        return [f"recall: the vectors cannot be read ({exc})"]
    return [] if reason is None else [reason]


def _hooks(home: Path, now: datetime) -> tuple[Check, str | None]:
    """The harness hooks' hard-error rate over the last day (``telemetry/heartbeat.jsonl``);
    typed degrades (skips, deadlines, no daemon) are not errors. Never fails the doctor:
    a hook that fails still exits 0 and its harness goes on."""
    from datetime import timedelta

    from tether.checkpoint.telemetry import hard_error_rate

    rate = hard_error_rate(home, now, timedelta(days=1))
    detail = (
        f"hard-error rate {rate.rate:.0%} ({rate.errors} of {rate.runs} runs in the last 24 h)"
        if rate.runs
        else "no hook run in the last 24 h"
    )
    warning = None
    if rate.errors:
        warning = f"hooks: {rate.errors} hard error(s) in the last 24 h ({', '.join(rate.names)})"
    return Check("hooks", True, detail), warning
