"""``tether doctor``'s look for damage: the SQLite store (a lost WAL, ``quick_check``, the
full-text index) and every session log (malformed lines, checksums, torn tails cut).

Each finding is a ``Problem`` named after its entry in ``docs/runbook.md`` with the
repair to run; torn tails cut after a crash are warnings (tether repaired them; the
owner should know a write was lost). Reading every log costs time on a large home:
doctor is run by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether.config import Config
from tether.sessions.integrity import check_log, torn_tails
from tether.sessions.session import SESSIONS_DIR, Session, list_sessions

#: What to run (or do) for each problem; the runbook entry of the same name says more.
REPAIRS = {
    "store-wal-lost": "tether memory reindex (rebuilds the index from the logs); "
    "see the runbook for notes and pages",
    "store-malformed": "stop tether serve, recover tether.db (sqlite3 .recover), "
    "then tether memory reindex",
    "fts-missing": "tether memory reindex",
    "fts-empty": "tether memory reindex",
    "session-log-corrupt": "restore or remove the line; recall reads past it meanwhile",
    "session-log-changed": "restore the log from a backup, or undo the edit",
    "session-log-cut": "restore the log from a backup",
}
#: Torn tails listed one by one at most; the rest are counted.
TORN_SHOWN = 5


@dataclass(frozen=True)
class Problem:
    name: str
    where: str
    line: int | None
    detail: str
    repair: str


def wal_problems(home: Path, config: Config) -> list[Problem]:
    """A lost WAL: checked before anything opens the store (opening hides it)."""
    if config.store.url:
        return []
    from tether.stores import sqlite_path
    from tether.stores.sqlite.health import note_lost_wal, wal_lost

    path = sqlite_path(home, config)
    found = wal_lost(path)
    if found is None:
        return []
    note_lost_wal(path)  # the checks below open the file, which hides it: recorded
    return [_store_problem(path, found.name, found.detail)]


def wal_warnings(home: Path, config: Config) -> list[str]:
    """The lost WALs recorded when the store was opened (the last few)."""
    if config.store.url:
        return []
    from tether.stores import sqlite_path
    from tether.stores.sqlite.health import lost_wals

    return [
        f"store: a lost write-ahead log ({w.frames} committed page write(s)) was found when "
        f"the store was opened at {w.time:%Y-%m-%dT%H:%M:%SZ}; what was committed after "
        "the last checkpoint is gone (runbook: store-wal-lost)"
        for w in lost_wals(sqlite_path(home, config))[-TORN_SHOWN:]
    ]


def store_problems(home: Path, config: Config) -> list[Problem]:
    """``quick_check`` and the full-text index of the SQLite store (none for PostgreSQL)."""
    if config.store.url:
        return []
    from tether.stores import sqlite_path
    from tether.stores.sqlite.health import fts_problem, quick_check

    path = sqlite_path(home, config)
    if not path.exists():
        return []
    found = quick_check(path) or fts_problem(path)
    return [] if found is None else [_store_problem(path, found.name, found.detail)]


def _store_problem(path: Path, name: str, detail: str) -> Problem:
    return Problem(name, str(path), None, detail, REPAIRS[name])


def session_problems(home: Path) -> list[Problem]:
    """Every epoch log of every session: malformed lines, checksum mismatches, cuts."""
    out = []
    for sid in list_sessions(home):
        directory = home / SESSIONS_DIR / sid
        for epoch in Session.epochs_on_disk(directory):
            path = directory / f"{epoch}.jsonl"
            try:
                found = check_log(path)
            except OSError as exc:
                out.append(
                    Problem(
                        "session-log-corrupt",
                        str(path),
                        None,
                        str(exc),
                        REPAIRS["session-log-corrupt"],
                    )
                )
                continue
            out += [Problem(p.name, str(p.path), p.line, p.detail, REPAIRS[p.name]) for p in found]
    return out


def torn_tail_warnings(home: Path) -> list[str]:
    """One line per torn tail cut (the last few), and how many there were."""
    cuts = torn_tails(home)
    if not cuts:
        return []
    lines = [
        f"session {c.session} epoch {c.epoch}: a torn last line of {c.bytes} bytes (a write "
        f"a crash cut short) was cut at {c.time:%Y-%m-%dT%H:%M:%SZ} (runbook: session-torn-tail)"
        for c in cuts[-TORN_SHOWN:]
    ]
    if len(cuts) > TORN_SHOWN:
        lines.append(f"... and {len(cuts) - TORN_SHOWN} earlier torn tail(s) cut")
    return lines
