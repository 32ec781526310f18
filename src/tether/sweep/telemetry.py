"""One line per sweep run in ``<home>/telemetry/sweep.jsonl``: counts, statuses and reason
codes only, never memory text."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

import msgspec

from tether.files import append_home
from tether.sweep.runner import RunReport

TELEMETRY_FILE = Path("telemetry") / "sweep.jsonl"


class RunLog:
    """Appends what a run did to ``path`` (its folder made on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, moment: datetime, report: RunReport) -> None:
        statuses = Counter(o.status for o in report.owners)
        reasons = Counter(r for o in report.owners for r in [o.reason] if r)
        line = {
            "time": moment.isoformat(),
            "status": report.status,
            "reason": report.reason,
            "totals": report.totals(),
            "owners": dict(statuses),
            "reasons": dict(reasons),
        }
        self.path.parent.mkdir(exist_ok=True)
        append_home(self.path, msgspec.json.encode(line) + b"\n")  # never through a link
