"""The page's views: each reads what it shows through the same services the CLI's
listings use (sessions, recall, identity, notes, the journals, the sweep store, the run
ledger, the usage report) and returns a template and its values. Nothing here writes but
what the CLI's readers write too (recall's index pass and its recalls log)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request

from tether.core.recall.summaries import span_of
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
def store_of(services: UiServices) -> Iterator[Store]:
    """The home's store, as the page holds it (``UiServices.store``: opened once)."""
    yield services.store()


@contextlib.contextmanager
def sweep_of(services: UiServices, *, migrate: bool = False) -> Iterator[SweepStore]:
    """The sweep store: as a reader for recall and the memory scan, with its tables made
    (``migrate``) for the sweep's own listings, as the CLI takes each (held by the page)."""
    yield services.sweep(migrate)


def _page(request: Request) -> int:
    try:
        return int(request.query_params.get("page", "1"))
    except ValueError:
        raise BadInputError("page must be a number") from None


def overview(services: UiServices, _request: Request) -> View:
    from tether.sessions import list_sessions

    with store_of(services) as store:
        notes = len(store.notes())
        journal = len(store.journal(None))
    return "overview.html", {
        "home": str(services.home),
        "sessions": len(list_sessions(services.home)),
        "notes": notes,
        "journal": journal,
    }


def sessions(services: UiServices, request: Request) -> View:
    p, rows = session_rows(services.home, _page(request))
    return "sessions.html", {"p": p, "rows": rows}


def session(services: UiServices, request: Request) -> View:
    sid = session_id(request.path_params["sid"])
    page = session_page(services.home, sid, _page(request), home_allow(services.home))
    return "session.html", {"s": page, "starts": epoch_pages(page.epochs)}


def segment(services: UiServices, request: Request) -> View:
    from tether.checkpoint.bank import read_segment

    name = request.path_params["name"]
    return "segment.html", {"segment": name, "text": shown(read_segment(services.home, name))}


def _source(ref: str, sid: str | None, turn: int | None) -> tuple[str, str]:
    """(label, address) of where a hit came from (a summary unit: its turns, opened at
    the first)."""
    if sid is not None and turn is not None:
        return f"{sid} turn {turn}", f"/sessions/{sid}/turns/{turn}"
    span = span_of(ref)
    if span is not None:
        where = f"{span.session} turns {span.first}-{span.last}"
        if span.epoch is not None:
            where += f" (epoch {span.epoch})"
        return where, f"/sessions/{span.session}/turns/{span.first}"
    what, _, key = ref.partition(":")
    if what == "note":
        return f"note {key}", f"/memory#note-{key}"
    if what == "identity":
        return f"identity [{key}]", f"/memory#{key}"
    if what == "fact":
        return f"fact {key}", f"/facts#fact-{key}"
    return ref, ""


def recall(services: UiServices, request: Request) -> View:
    from tether.recall.home import find, prepare

    query = request.query_params.get("q", "").strip()
    in_time = request.query_params.get("order") == "time"
    hits: list[dict[str, Any]] = []
    errors: list[tuple[str, str]] = []
    failed: list[str] = []
    fused = False
    note: str | None = None
    if query:
        with store_of(services) as store:
            vectors = services.vectors()  # after the store is open: it migrates the file
            # What `memory recall` does first: the windows the hooks banked, the index
            # pass (each best effort), and a few rows without a vector embedded; else
            # the page says it searched by words only, and why.
            prepared = prepare(services.home, store, vectors, slot=services.config.slots.main)
            caught = prepared.caught
            errors = [(sid, shown(p)) for sid, p in caught.index.errors]
            failed += [f"{what}: {shown(str(error))}" for what, error in caught.failures()]
            fused, note = prepared.ready.fused, prepared.ready.notice
            with sweep_of(services) as sweep:
                found = find(
                    services.home,
                    store,
                    query,
                    50,
                    time=services.now(),
                    sweep=sweep,
                    vectors=vectors,
                    in_time_order=in_time,
                )
        for f in found:
            h = f.hit
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
                    "segment": f.link,
                }
            )
    return "recall.html", {
        "q": query,
        "hits": hits,
        "errors": errors,
        "failed": failed,
        "fused": fused,
        "note": note,
        "in_time": in_time,
    }


def memory(services: UiServices, _request: Request) -> View:
    from tether.memory.identity import Identity

    with store_of(services) as store:
        identity = Identity(services.home, store)
        entries = identity.entries()
        notes = store.notes()
    allow = home_allow(services.home)
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


def facts(services: UiServices, _request: Request) -> View:
    owners: list[dict[str, Any]] = []
    with sweep_of(services, migrate=True) as sweep, sweep.transaction(write=False) as tx:
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


def journal(services: UiServices, request: Request) -> View:
    with store_of(services) as store:
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


def _telemetry(services: UiServices, limit: int = 50) -> list[dict[str, Any]]:
    from tether.sweep.telemetry import TELEMETRY_FILE

    path = services.home / TELEMETRY_FILE
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


def sweep(services: UiServices, _request: Request) -> View:
    from tether.sweep.status import status

    rows: list[dict[str, Any]] = []
    with sweep_of(services, migrate=True) as store:
        done = status(services.home, services.config.sweep, store)
        with store.transaction(write=False) as tx:
            journals = {o.owner.id: tx.journal(o.owner.id) for o in done.owners}
    for o in done.owners:
        cur = o.cursor
        rows.append(
            {
                "id": o.owner.id,
                "zone": o.owner.timezone_name,
                "deleted": o.owner.deleted_at is not None,
                "first_date": o.owner.first_date.isoformat(),
                "cursor": None if cur is None else cur.local_date.isoformat(),
                "window": None if cur is None else cur.window_id,
                "reconcile": o.needs_reconciliation,
                "pending": o.receipts_pending,
                "committed": o.receipts_committed,
                "facts": o.facts,
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
                    for j in reversed(journals[o.owner.id][-200:])
                ],
            }
        )
    return "sweep.html", {"state": done.state, "owners": rows, "runs": _telemetry(services)}


def jobs(services: UiServices, request: Request) -> View:
    from tether.scheduler.ledger import RunLedger
    from tether.scheduler.listing import job_listing

    runs = RunLedger(services.home).read()
    listed: list[dict[str, Any]] = [
        {"name": j.name, "error": shown(j.error)}
        if j.error is not None
        else {
            "name": j.name,
            "schedule": j.schedule,
            "next": None if j.next_run is None else stamp(j.next_run),
            "error": None,
        }
        for j in job_listing(services.home, services.now(), runs)
    ]
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


def usage(services: UiServices, request: Request) -> View:
    import dataclasses

    from tether.usage.report import usage as usage_report

    by = request.query_params.get("by", "kind")
    if by not in ("kind", "day", "session"):
        raise BadInputError("by is one of kind, day, session")
    with sweep_of(services) as sweep, store_of(services) as store:
        found = usage_report(services.home, services.config, store, sweep, by=by)  # type: ignore[arg-type]  # checked above
    done = found.report
    return "usage.html", {
        "by": by,
        "zone": found.zone,
        "lines": [dataclasses.asdict(x) for x in done.lines],
        "total": dataclasses.asdict(done.total),
        "share": done.main_cache_hit_share,
    }


def scan(services: UiServices, _request: Request) -> View:
    from tether.memory.identity import Identity
    from tether.memory.secret_scan import scan_memory

    allow = home_allow(services.home)
    with store_of(services) as store, sweep_of(services) as sweep:
        report = scan_memory(
            Identity(services.home, store),
            store,
            allow=allow,
            fix=False,
            time=services.now(),
            sweep=sweep,
        )
    return "scan.html", {"places": report.places}
