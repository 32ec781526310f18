"""Soak, the sweep-worker lane (``soak.py --sweep``): ``tether sweep worker`` processes on
one PostgreSQL database, killed with SIGKILL and cut off by ``pg_terminate_backend``,
over many owners and days.

The database holds ``--tenants`` owner schemas of ``--owners`` sweep owners, each with
``--days`` completed local days staged (the deterministic producer's packets: 4
candidates, 2 sources a day), and ``--model-days`` more schemas whose first day has turns
and no packet: a worker sweeps those with the model pass (its mark in
``sweep_model_stage``) against a fake llama-server of its own (every request takes
``--model-latency`` seconds, so kills land mid-call). The last day is yesterday, and the
workers run on the wall clock, so leases run out as they would in production.
``--workers`` workers run until every owner-day is done; every ``--fault-every`` seconds
on average one fault lands: a worker SIGKILLed (and started again), or every connection
of one worker terminated by the server. At the end each worker is stopped with SIGTERM
(it must exit 0), and:

- ``acknowledged``: owner-days a worker marked done; ``lost``: done but not applied (the
  owner's cursor short of it, a receipt not committed); ``stuck``: not done at the end
  (``--minutes`` is the deadline); ``duplicated``: a journal entry or active fact slot
  twice, a receipt twice, or a model call for a day while an earlier call for that day
  was made by a worker still alive (so possibly still running: the at-most-one-call
  rule); ``reinvoked``: a day's model called again after the worker that called it first
  was killed (allowed: its answer died with it, and its mark's lease had run out);
- ``tracebacks``: in any worker's stderr.

Prints one JSON line; exits 1 when lost, stuck, duplicated or tracebacks is not 0.
Without PostgreSQL (``TETHER_TEST_POSTGRES`` unset or not answering) it prints why and
exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

TETHER = [sys.executable, "-m", "tether.cli.main"]
#: Every model day's session is ``club-<schema>``; the one reply the fakes give to both
#: phases cites them all (phase B keeps the day's own: the others are not in its enum).
MODEL_SESSION = "club-{}"


def page(model: list[str]) -> str:
    memory = {
        "text": "The book club meets on Tuesdays",
        "subject": "owner",
        "entity": "book-club",
        "sessions": [MODEL_SESSION.format(m) for m in model],
    }
    return json.dumps({"excerpts": [], "memories": [memory], "folders": []})


@dataclass
class Slot:
    """One worker's place: its fake model server and the processes it has run."""

    fake: Any
    config: Path
    proc: subprocess.Popen[str] | None = None
    started: float = 0.0
    lives: list[tuple[float, float]] = field(default_factory=list)  # (start, end)
    errs: list[str] = field(default_factory=list)


@contextlib.contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """A new database on the server, dropped at the end (workers sweep every schema)."""
    import psycopg

    name = f"tether_soak_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        parts = urlsplit(server)
        yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def skip(reason: str) -> int:
    print(json.dumps({"lane": "sweep", "skipped": reason}))
    return 0


def seed_staged(url: str, tenant: str, owners: int, day0: date, days: int) -> None:
    from tether.core.sweep.packet import digest, encode_packet
    from tether.core.sweep.state import Owner, StagedPacket
    from tether.core.sweep.windows import window_for
    from tether.stores.postgres.sweep import PostgresSweepStore
    from tether.sweep.producer import DeterministicProducer

    producer = DeterministicProducer()
    t0 = datetime.combine(day0, datetime.min.time(), UTC)
    with PostgresSweepStore(url, tenant) as store, store.transaction() as tx:
        for i in range(owners):
            owner = Owner(id=f"o{i:04d}", timezone_name="UTC", first_date=day0, created_at=t0)
            tx.put_owner(owner)
            for d in range(days):
                window = window_for("UTC", day0 + timedelta(days=d))
                packet = producer.produce(owner, window)
                tx.put_stage(
                    StagedPacket(
                        owner=owner.id,
                        local_date=window.local_date,
                        source_generation=owner.source_generation,
                        window_id=window.window_id,
                        digest=digest(packet),
                        packet=encode_packet(packet),
                        created_at=t0,
                    )
                )


def seed_model_day(url: str, tenant: str, root: Path, day0: date) -> None:
    """A home's one session on ``day0`` indexed into the tenant's schema, no packet
    staged; its later days have no turns (empty, complete at once)."""
    import msgspec

    from tether.core.sweep.state import Owner
    from tether.home import init_home
    from tether.memory.indexer import index_home
    from tether.records import Assistant, Baseline, User
    from tether.sessions import Session
    from tether.stores.postgres import PostgresStore
    from tether.stores.postgres.sweep import PostgresSweepStore

    home = root / tenant
    init_home(home)
    t = datetime.combine(day0, datetime.min.time(), UTC) + timedelta(hours=9)
    sid = MODEL_SESSION.format(tenant)
    s = Session.create(home, sid, baseline=Baseline(system="s", memory="m"), slot=0, time=t)
    s.append(User(time=t, text="We moved the book club to Tuesdays."))
    s.append(Assistant(time=t + timedelta(seconds=5), text="Noted."))
    with PostgresStore(url, tenant) as store:
        index_home(home, store)
        for meta in store.sessions_meta().values():
            store.put_session_meta(msgspec.structs.replace(meta, onboarding=False))
    with PostgresSweepStore(url, tenant) as sweep, sweep.transaction() as tx:
        tx.put_owner(
            Owner(id="owner", timezone_name="UTC", first_date=day0, created_at=t),
        )


def start(slot: Slot, url: str) -> None:
    """A worker on the wall clock (its receipts' and claims' leases run out in real time)."""
    env = dict(os.environ)
    for k in ("TETHER_CRASH_AT", "TETHER_PAUSE_AT", "TETHER_TEST_NOW"):
        env.pop(k, None)
    slot.proc = subprocess.Popen(
        [*TETHER, "sweep", "worker", "--url", url, "--config", str(slot.config), "--json",
         "--lease", "3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    slot.started = time.monotonic()


def reap(slot: Slot, sig: int) -> int | None:
    """Signal the slot's worker, wait for it, keep its stderr; its exit code."""
    p = slot.proc
    if p is None:
        return None
    p.send_signal(sig)
    _out, err = p.communicate(timeout=120)
    slot.lives.append((slot.started, time.monotonic()))
    slot.errs.append(err)
    slot.proc = None
    return p.returncode


def progress(url: str, schemas: list[str]) -> tuple[int, int]:
    """(owner-days done, owner-days offered) over the schemas."""
    import psycopg

    done = total = 0
    with psycopg.connect(url, autocommit=True) as c:
        for s in schemas:
            rows = c.execute(
                f'SELECT state, count(*) FROM "tether_{s}".sweep_claim GROUP BY 1'
            ).fetchall()
            for state, n in rows:
                total += n
                done += n if state == "done" else 0
    return done, total


def check(url: str, schemas: list[str], last: date) -> dict[str, int]:
    """Acknowledged, lost, stuck and duplicated writes over the schemas' owner-days."""
    import psycopg

    out = dict.fromkeys(("acknowledged", "lost", "stuck", "duplicated_writes"), 0)
    with psycopg.connect(url, autocommit=True) as c:
        for s in schemas:
            q = f'"tether_{s}"'
            rows = c.execute(f"SELECT owner, local_date FROM {q}.sweep_claim WHERE state = 'done'")
            acked = set(rows.fetchall())
            out["acknowledged"] += len(acked)
            cursors: dict[str, str] = {
                str(o): str(d)
                for o, d in c.execute(f"SELECT owner, local_date FROM {q}.sweep_cursor")
            }
            pending = set(
                c.execute(
                    f"SELECT owner, local_date FROM {q}.sweep_receipt WHERE state <> 'committed'"
                ).fetchall()
            )
            out["lost"] += sum(
                1 for o, d in acked if str(cursors.get(o, "")) < d or (o, d) in pending
            )
            for o, first in c.execute(f"SELECT id, first_date FROM {q}.sweep_owner").fetchall():
                cur = cursors.get(o)
                due = (
                    date.fromisoformat(cur) + timedelta(days=1)
                    if cur
                    else date.fromisoformat(first)
                )
                out["stuck"] += max(0, (last - due).days + 1)  # days not swept by the end
            dup = c.execute(
                f"SELECT (SELECT count(*) - count(DISTINCT receipt_id) FROM {q}.sweep_journal)"
                f" + (SELECT count(*) FROM (SELECT 1 FROM {q}.sweep_fact WHERE active = 1"
                " GROUP BY owner, subject, entity HAVING count(*) > 1) AS d)"
            ).fetchone()
            out["duplicated_writes"] += int(dup[0]) if dup else 0
    return out


def model_calls(slots: list[Slot], model: list[str]) -> tuple[int, int, int]:
    """(phase-A calls, duplicated, reinvoked) over the model days, each told by its
    session id in the spine: a call for a day while the worker process that made an
    earlier call for it was still alive (so that call may still have been running) is a
    duplicate; a call after it died, or by the same process after its own call ended, a
    re-invocation."""
    calls: list[tuple[float, int, str]] = []
    for i, slot in enumerate(slots):
        for r in slot.fake.requests:
            if "excerpts" not in json.dumps(r.json_schema or {}):
                continue  # phase B, or a digest
            spine = json.dumps(r.messages)
            for m in model:
                if MODEL_SESSION.format(m) in spine:
                    calls.append((r.time, i, m))
    calls.sort()
    duplicated = reinvoked = 0
    seen: dict[str, list[tuple[float, int]]] = {}
    for t, i, day in calls:
        for t0, j in seen.get(day, []):
            life = next(((a, b) for a, b in slots[j].lives if a <= t0 <= b), None)
            same = i == j and life is not None and life[0] <= t <= life[1]
            if life is not None and life[1] > t and not same:
                duplicated += 1
            else:
                reinvoked += 1
        seen.setdefault(day, []).append((t, i))
    return len(calls), duplicated, reinvoked


def run(args: argparse.Namespace) -> int:
    url0 = os.environ.get("TETHER_TEST_POSTGRES")
    if not url0:
        return skip("TETHER_TEST_POSTGRES is not set (no PostgreSQL)")
    try:
        import psycopg

        with psycopg.connect(url0, autocommit=True, connect_timeout=5):
            pass
    except Exception as exc:
        return skip(f"PostgreSQL at {url0} does not answer: {type(exc).__name__}")
    from tether.daemon.fleet import application_name
    from tether.testing.fake_llama import FakeLlama, Reply

    rng = random.Random(args.seed)
    day0 = datetime.now(UTC).date() - timedelta(days=args.days)  # the last is yesterday
    last = day0 + timedelta(days=args.days - 1)
    faults = {"sigkill": 0, "terminate": 0}
    with fresh_database(url0) as url, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        staged = [f"s{i}" for i in range(args.tenants)]
        model = [f"m{i}" for i in range(args.model_days)]
        for s in staged:
            seed_staged(url, s, args.owners, day0, args.days)
        for m in model:
            seed_model_day(url, m, root, day0)
        slots = []
        for i in range(args.workers):
            fake = FakeLlama(n_ctx=65536, parallel=2, latency_s=args.model_latency).start()
            for _ in range(20 * args.model_days + 20):
                fake.script(Reply(content=page(model)))
            config = root / f"worker{i}.toml"
            config.write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 2\n')
            slots.append(Slot(fake=fake, config=config))
        began = time.monotonic()
        deadline = began + args.minutes * 60
        for slot in slots:
            start(slot, url)
        total = (args.tenants * args.owners + args.model_days) * args.days
        next_fault = began + rng.uniform(0, 2 * args.fault_every)
        while time.monotonic() < deadline:
            time.sleep(0.2)
            done, _ = progress(url, staged + model)
            if done >= total:
                break
            if time.monotonic() < next_fault:
                continue
            next_fault = time.monotonic() + rng.uniform(0, 2 * args.fault_every)
            slot = rng.choice(slots)
            if slot.proc is None:
                continue
            if rng.random() < 0.5:
                reap(slot, signal.SIGKILL)
                faults["sigkill"] += 1
                start(slot, url)
            else:
                with psycopg.connect(url, autocommit=True) as c:
                    c.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE application_name = %s",
                        (application_name(slot.proc.pid),),
                    )
                faults["terminate"] += 1
        elapsed = time.monotonic() - began
        codes = [reap(slot, signal.SIGTERM) for slot in slots]
        figures = check(url, staged + model, last)
        calls, dup_calls, reinvoked = model_calls(slots, model)
        for slot in slots:
            slot.fake.stop()
    tracebacks = sum(err.count("Traceback") for slot in slots for err in slot.errs)
    result = {
        "lane": "sweep",
        "owner_days": total,
        "workers": args.workers,
        "seconds": round(elapsed, 1),
        **faults,
        **figures,
        "model_calls": calls,
        "duplicated_model_calls": dup_calls,
        "reinvoked": reinvoked,
        "duplicated": figures["duplicated_writes"] + dup_calls,
        "sigterm_exit_codes": codes,
        "tracebacks": tracebacks,
    }
    print(json.dumps(result))
    bad = result["lost"] or result["stuck"] or result["duplicated"] or tracebacks
    return 1 if bad or any(c != 0 for c in codes) else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenants", type=int, default=8, help="owner schemas (staged days)")
    parser.add_argument("--owners", type=int, default=50, help="sweep owners per schema")
    parser.add_argument("--days", type=int, default=3, help="completed days per owner")
    parser.add_argument("--model-days", type=int, default=8, help="schemas of one model day")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--fault-every", type=float, default=2.0, help="mean seconds")
    parser.add_argument("--model-latency", type=float, default=1.0, help="seconds a request")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    add_arguments(p)
    p.add_argument("--minutes", type=float, default=4.0)
    p.add_argument("--seed", type=int, default=1)
    raise SystemExit(run(p.parse_args()))
