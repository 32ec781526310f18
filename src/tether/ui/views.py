"""The page's views: each reads what it shows through the same services the CLI's
listings use (sessions, recall, identity, notes, the journals, the sweep store, the run
ledger, the usage report) and returns a template and its values. Nothing here writes but
what the CLI's readers write too (recall's index pass and its recalls log)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request

from tether.errors import BadInputError
from tether.files import read_home_bytes
from tether.ids import session_id
from tether.scan.allow import home_allow
from tether.ui.reading import epoch_pages, paged, session_page, session_rows, shown, stamp

if TYPE_CHECKING:
    from tether.ports import Store, SweepStore
    from tether.ui.app import UiServices

View = tuple[str, dict[str, Any]]


@contextlib.contextmanager
def store_of(s: UiServices) -> Iterator[Store]:
    """The home's store, as the page holds it (``UiServices.store``: opened once)."""
    yield s.store()


@contextlib.contextmanager
def sweep_of(s: UiServices, *, migrate: bool = False) -> Iterator[SweepStore]:
    """The sweep store: as a reader for recall and the memory scan, with its tables made
    (``migrate``) for the sweep's own listings, as the CLI takes each (held by the page)."""
    yield s.sweep(migrate)


def _page(request: Request) -> int:
    try:
        return int(request.query_params.get("page", "1"))
    except ValueError:
        raise BadInputError("page must be a number") from None


def overview(s: UiServices, _request: Request) -> View:
    from tether.sessions import list_sessions

    with store_of(s) as store:
        notes = len(store.notes())
        journal = len(store.journal(None))
    return "overview.html", {
        "home": str(s.home),
        "sessions": len(list_sessions(s.home)),
        "notes": notes,
        "journal": journal,
    }


def sessions(s: UiServices, request: Request) -> View:
    p, rows = session_rows(s.home, _page(request))
    return "sessions.html", {"p": p, "rows": rows}


def session(s: UiServices, request: Request) -> View:
    sid = session_id(request.path_params["sid"])
    page = session_page(s.home, sid, _page(request), home_allow(s.home))
    return "session.html", {"s": page, "starts": epoch_pages(page.epochs)}


def segment(s: UiServices, request: Request) -> View:
    from tether.checkpoint.bank import read_segment

    name = request.path_params["name"]
    return "segment.html", {"segment": name, "text": shown(read_segment(s.home, name))}


def _source(ref: str, sid: str | None, turn: int | None) -> tuple[str, str]:
    """(label, address) of where a hit came from."""
    if sid is not None and turn is not None:
        return f"{sid} turn {turn}", f"/sessions/{sid}/turns/{turn}"
    what, _, key = ref.partition(":")
    if what == "note":
        return f"note {key}", f"/memory#note-{key}"
    if what == "identity":
        return f"identity [{key}]", f"/memory#{key}"
    if what == "fact":
        return f"fact {key}", f"/facts#fact-{key}"
    return ref, ""


def recall(s: UiServices, request: Request) -> View:
    from tether.checkpoint.recallable import Links, catch_up
    from tether.memory.indexer import index_home
    from tether.memory.recall import recall as run_recall
    from tether.scan.allow import home_allow

    query = request.query_params.get("q", "").strip()
    in_time = request.query_params.get("order") == "time"
    hits: list[dict[str, Any]] = []
    errors: list[tuple[str, str]] = []
    fused = False
    if query:
        with store_of(s) as store:
            catch_up(s.home, allow=home_allow(s.home))  # windows the hooks banked
            errors = [(sid, shown(p)) for sid, p in index_home(s.home, store).errors]
            vectors = s.vectors()  # after the store is open: it migrates the file
            if vectors is not None:
                fused = vectors.refresh().complete  # rows indexed since may lack vectors
            with sweep_of(s) as sweep:
                found = run_recall(
                    store,
                    query,
                    50,
                    time=s.now(),
                    home=s.home,
                    sweep=sweep,
                    vectors=vectors,
                    in_time_order=in_time,
                )
        links = Links(s.home)
        for h in found:
            label, href = _source(h.ref, h.session, h.turn)
            hits.append(
                {
                    "kind": h.kind,
                    "tag": h.tag,
                    "score": round(h.score, 2),
                    "date": "" if h.time is None else stamp(h.time)[:10],
                    "text": shown(h.text),
                    "source": label,
                    "href": href,
                    "segment": links.of(h.session, h.time),
                }
            )
    return "recall.html", {
        "q": query,
        "hits": hits,
        "errors": errors,
        "fused": fused,
        "in_time": in_time,
    }


def memory(s: UiServices, _request: Request) -> View:
    from tether.memory.identity import Identity

    with store_of(s) as store:
        identity = Identity(s.home, store)
        entries = identity.entries()
        notes = store.notes()
    allow = home_allow(s.home)
    return "memory.html", {
        "file": str(identity.path),
        "entries": [{"id": e.id, "text": shown(e.text, allow)} for e in entries],
        "notes": [
            {
                "id": n.id,
                "text": shown(n.text, allow),
                "untrusted": n.untrusted,
                "session": n.session,
                "time": stamp(n.time),
            }
            for n in notes
        ],
    }


def _refs(text: str) -> list[dict[str, str]]:
    """A fact's provenance: each source ref with the address it leads to."""
    try:
        refs = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return [{"label": text, "href": ""}]
    out = []
    for r in refs if isinstance(refs, list) else []:
        if not isinstance(r, dict):
            continue
        sid = str(r.get("session", ""))
        if r.get("turn") is not None:
            out.append(
                {"label": f"{sid} turn {r['turn']}", "href": f"/sessions/{sid}/turns/{r['turn']}"}
            )
        elif r.get("epoch") is not None:
            out.append({"label": f"{sid} epoch {r['epoch']} summary", "href": f"/sessions/{sid}"})
        else:
            out.append({"label": sid, "href": f"/sessions/{sid}"})
    return out


def facts(s: UiServices, _request: Request) -> View:
    owners: list[dict[str, Any]] = []
    with sweep_of(s, migrate=True) as sweep, sweep.transaction(write=False) as tx:
        for o in tx.owners():
            owners.append(
                {
                    "id": o.id,
                    "facts": [
                        {
                            "id": f.id,
                            "subject": f.subject,
                            "entity": f.entity,
                            "text": shown(f.text),
                            "authority": f.authority,
                            "refs": _refs(f.refs),
                            "receipt": f.origin_receipt,
                            "updated": stamp(f.updated_at),
                            "active": f.active,
                        }
                        for f in tx.facts(o.id)
                    ],
                }
            )
    return "facts.html", {"owners": owners}


def journal(s: UiServices, request: Request) -> View:
    with store_of(s) as store:
        entries = list(reversed(store.journal(None)))  # newest first
    p = paged(len(entries), _page(request))
    rows = [
        {
            "time": stamp(j.time),
            "who": j.who,
            "session": j.session,
            "action": j.action,
            "target": j.target,
            "before": None if j.before is None else shown(j.before),
            "after": None if j.after is None else shown(j.after),
        }
        for j in entries[p.start : p.stop]
    ]
    return "journal.html", {"p": p, "rows": rows}


def _telemetry(s: UiServices, limit: int = 50) -> list[dict[str, Any]]:
    from tether.sweep.telemetry import TELEMETRY_FILE

    path = s.home / TELEMETRY_FILE
    try:
        lines = read_home_bytes(path).splitlines()
    except FileNotFoundError:
        return []
    out = []
    for raw in reversed(lines[-limit:]):
        with contextlib.suppress(msgspec.DecodeError):
            line = msgspec.json.decode(raw)
            if isinstance(line, dict):
                out.append(line)
    return out


def sweep(s: UiServices, _request: Request) -> View:
    c = s.config.sweep
    rows: list[dict[str, Any]] = []
    with sweep_of(s, migrate=True) as store, store.transaction(write=False) as tx:
        for o in tx.owners():
            cur = tx.cursor(o.id)
            states = Counter(r.state for r in tx.receipts(o.id))
            history = tx.journal(o.id)
            rows.append(
                {
                    "id": o.id,
                    "zone": o.timezone_name,
                    "deleted": o.deleted_at is not None,
                    "first_date": o.first_date.isoformat(),
                    "cursor": None if cur is None else cur.local_date.isoformat(),
                    "window": None if cur is None else cur.window_id,
                    "reconcile": cur is not None and cur.timezone_name != o.timezone_name,
                    "pending": states["pending"],
                    "committed": states["committed"],
                    "facts": len(tx.facts(o.id)),
                    "journal": [
                        {
                            "time": stamp(j.time),
                            "who": j.who,
                            "action": j.action,
                            "target": j.target,
                            "before": None if j.before is None else shown(j.before),
                            "after": None if j.after is None else shown(j.after),
                            "evidence": j.evidence,
                        }
                        for j in reversed(history[-200:])
                    ],
                }
            )
    state = "open" if c.enabled and not c.kill_switch else ("killed" if c.kill_switch else "closed")
    return "sweep.html", {"state": state, "owners": rows, "runs": _telemetry(s)}


def jobs(s: UiServices, request: Request) -> View:
    from tether.core.cron import next_due
    from tether.scheduler.jobs import JobFileError, job_paths, load_job
    from tether.scheduler.ledger import RunLedger

    runs = RunLedger(s.home).read()
    now = s.now()
    listed: list[dict[str, Any]] = []
    for path in job_paths(s.home):
        try:
            job = load_job(path)
        except JobFileError as exc:
            listed.append({"name": path.stem, "error": shown(exc.problem)})
            continue
        due = next_due(job.schedule, now)
        listed.append(
            {
                "name": job.name,
                "schedule": job.schedule.text,
                "next": None if due is None else stamp(due),
                "error": None,
            }
        )
    p = paged(len(runs), _page(request))
    shown_runs = [
        {
            "time": stamp(r.time),
            "name": r.name,
            "session": r.session,
            "status": r.status,
            "reason": r.reason,
        }
        for r in list(reversed(runs))[p.start : p.stop]
    ]
    return "jobs.html", {"jobs": listed, "runs": shown_runs, "p": p}


def usage(s: UiServices, request: Request) -> View:
    import dataclasses
    from zoneinfo import ZoneInfo

    from tether.core.budget import Prices
    from tether.core.usage import report
    from tether.sessions.usage import logged_usage

    by = request.query_params.get("by", "kind")
    if by not in ("kind", "day", "session"):
        raise BadInputError("by is one of kind, day, session")
    with sweep_of(s) as sweep:
        zone = s.zone(sweep)
    with store_of(s) as store:
        ledger = store.budget_rows(None)
    b = s.config.budget
    done = report(
        logged_usage(s.home),
        ledger,
        zone=ZoneInfo(zone),
        prices=Prices(b.usd_per_mtok_in, b.usd_per_mtok_out, b.usd_per_mtok_cached),
        by=by,  # type: ignore[arg-type]  # checked above
        since=None,
        main_slot=s.config.slots.main,
    )
    return "usage.html", {
        "by": by,
        "zone": zone,
        "lines": [dataclasses.asdict(x) for x in done.lines],
        "total": dataclasses.asdict(done.total),
        "share": done.main_cache_hit_share,
    }


def scan(s: UiServices, _request: Request) -> View:
    from tether.memory.identity import Identity
    from tether.memory.secret_scan import scan_memory

    allow = home_allow(s.home)
    with store_of(s) as store, sweep_of(s) as sweep:
        report = scan_memory(
            Identity(s.home, store), store, allow=allow, fix=False, time=s.now(), sweep=sweep
        )
    return "scan.html", {"places": report.places}
