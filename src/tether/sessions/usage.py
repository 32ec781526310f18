"""Every ``Usage`` record of a home's session logs, every epoch, with its session and the
slot its epoch ran on (what ``tether usage`` sums)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tether import files
from tether.core.spend.usage_rows import LoggedUsage
from tether.records import SessionStart, Usage
from tether.sessions.session import Session, list_sessions, session_dir


def logged_usage(home: Path) -> Iterator[LoggedUsage]:
    for sid in list_sessions(home):
        directory = session_dir(home, sid)
        for epoch in Session.epochs_on_disk(directory):
            records, _ = files.read_log(directory / f"{epoch}.jsonl")
            slot = -1
            for r in records:
                if isinstance(r, SessionStart):
                    slot = r.slot
                elif isinstance(r, Usage):
                    yield LoggedUsage(
                        session=sid,
                        slot=slot,
                        time=r.time,
                        cache_n=r.cache_n,
                        prompt_n=r.prompt_n,
                        predicted_n=r.predicted_n,
                    )
