"""``tether usage`` as one use case (and the page's usage view): tokens and estimated
cost of model calls per job kind, local day or session, with the main slot's cache hit
share.

Turns (live, heartbeat, cron) are summed from the session logs' ``Usage`` records;
compaction and tool-output summaries from the budget gate's ledger (which also counts the
calls ``[budget]`` refused); the harvest's and the sweep's extraction calls from
``telemetry/model_calls.jsonl``. Days are the home owner's local days
(``sweep.owners.home_zone``); cost uses ``[budget] usd_per_mtok_*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

from tether.config import Config
from tether.core.spend.budget_rules import Prices
from tether.core.spend.usage_rows import By, Report, report
from tether.extract.calls import read_calls
from tether.ports import SpendLedger, SweepStore
from tether.sessions.usage import logged_usage
from tether.sweep.owners import home_zone


@dataclass(frozen=True)
class Usage:
    """The report, and the zone whose local days it counts."""

    zone: str
    report: Report


def usage(
    home: Path,
    config: Config,
    store: SpendLedger,
    sweep: SweepStore | None,
    *,
    by: By,
    since: date | None = None,
) -> Usage:
    """What the model calls of ``home`` cost, by ``by``, from the local day ``since``."""
    zone = home_zone(sweep)
    ledger = store.budget_rows(since.isoformat() if since else None)
    b = config.budget
    done = report(
        logged_usage(home),
        ledger,
        zone=ZoneInfo(zone),
        prices=Prices(b.usd_per_mtok_in, b.usd_per_mtok_out, b.usd_per_mtok_cached),
        by=by,
        since=since,
        main_slot=config.slots.main,
        calls=read_calls(home),
    )
    return Usage(zone, done)
