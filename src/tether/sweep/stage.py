"""The model pass's stage: the at-most-once record of one owner-day's invocation, behind
the ``ModelStages`` port. A home keeps it in a file (``FileStages``,
``<home>/sweep/stage/<owner>/<local-date>.json``); a sweep worker, which has no home, in
the store (``stores.postgres.sweep_stage``: ``invoked`` committed before the first model
request, the outcome committed after, the same records, read by the same ``read``).

The ``invoked`` mark names its holder and a lease (``sweep.holder``): the holder renews
the lease before each model request, for longer than the request may run. Every later
write of the invocation (a renewal, the outcome, dropping an unsent mark) replaces the
record only while it is still that invocation's mark (compare and swap on the exact
record): once another run has taken the day over, the first holder's late write is
refused (fencing), and its page is never applied. A run finding the day marked:

- a live lease: the day is ``busy`` (``invocation_busy``), nothing is called;
- a lease run out and the holder gone (``sweep.holder``): the mark is taken over by a new
  invocation (one new model call: the first holder's can no longer be running);
- a lease run out and the holder still running on this machine: ``invocation_stalled``,
  never taken over while it runs.

In a file: JSON lines, the last complete one saying where the invocation is; writes are
made under a lock (``<owner>/.lock``, ``flock``). The mark is created atomically (temp
file, fsync, rename, fsync of the folder) before the first model request, so no crash or
power cut after that request can lose it; a takeover's mark is appended and fsynced. The
outcome is appended as one more line, with no fsync of its own: ``staged`` with the full
candidate page (the day's packet, folder assignments, counts) and its digest before any
candidate applies, or ``failed`` with a reason code when the invocation produced no
usable page. A killed process loses nothing the kernel was given; a power cut can lose or
tear that last line, and a torn tail is not read (it is cut before the next append), so
the file still says ``invoked``: the lease runs out and a later run takes the day over
(the runner commits the staged packet to the store, durably, right after the append, so
that window is milliseconds). A retry reads it:

- ``staged``: the exact page, checked against its digest;
- ``invoked``: as above (busy, stalled, or taken over after the lease);
- ``failed``, unreadable or a digest that does not match: the day stays incomplete with a
  reason (the failure's reason, ``stage_malformed``); ``tether sweep reconcile`` re-opens
  a failed day (runbook ``sweep-day-incomplete``);
- a stage of an older ``tether_sweep_daily_summary_stage.*`` schema (a deployment
  boundary): that deployment owned the window's invocation and its apply, so the reader
  attests an empty page and the cursor advances.

Everything in it was redacted before it was written (``scan``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Literal

import msgspec

from tether import files
from tether.core.sweep.errors import SweepFencedError
from tether.core.sweep.packet import DailySweepInput
from tether.core.sweep.windows import Window
from tether.ports import ModelStages
from tether.records import FolderAssignment
from tether.sweep.holder import Holder, Verdict, liveness, this_process, verdict

STAGE_DIR = ("sweep", "stage")
STAGE_PREFIX = "tether_sweep_daily_summary_stage."
STAGE_SCHEMA = STAGE_PREFIX + "v2"
MAX_STAGE_BYTES = 2_000_000
#: Added to ``[llm] timeout_s`` (which bounds each model call as a whole) for a mark's
#: lease: time for the process to see its call end.
LEASE_MARGIN = timedelta(seconds=2)
DEFAULT_LEASE = timedelta(seconds=120) + LEASE_MARGIN

StageState = Literal["invoked", "staged", "failed"]


def lease_for(timeout_s: float) -> timedelta:
    """Longer than one model call may run: a mark is held for twice this, and renewed
    before a request when less than this is left."""
    return timedelta(seconds=timeout_s) + LEASE_MARGIN


class StageFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    schema: str
    state: StageState
    invocation: str
    owner: str
    local_date: date
    window_id: str
    source_generation: int
    reason: str | None = None
    packet: DailySweepInput | None = None
    folders: tuple[FolderAssignment, ...] = ()
    #: Bounded reason codes -> counts (dropped memories, excerpts served, ...).
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    #: What each model call of the invocation used: (cache_n, prompt_n, predicted_n).
    usage: tuple[tuple[int, int, int], ...] = ()
    digest: str | None = None
    #: The ``invoked`` mark's holder, when it was first marked and until when it is held
    #: (on the stages' clock); none in a mark of an older tether (taken over as expired).
    holder: Holder | None = None
    since: datetime | None = None
    lease_until: datetime | None = None


class _Head(msgspec.Struct):
    schema: str = ""


_encoder = msgspec.json.Encoder(order="sorted")


def page_digest(packet: DailySweepInput, folders: tuple[FolderAssignment, ...]) -> str:
    return hashlib.sha256(_encoder.encode((packet, folders))).hexdigest()


class Read(msgspec.Struct, frozen=True):
    """What a stage says: ``absent``, ``older`` (attest empty), ``bad`` (malformed), or a
    stage of this schema; ``raw``: the record as stored (what a replace compares)."""

    kind: Literal["absent", "older", "bad", "current"]
    stage: StageFile | None = None
    raw: bytes = b""


def path_of(home: Path, owner: str, local_date: date) -> Path:
    return home.joinpath(*STAGE_DIR, owner, f"{local_date.isoformat()}.json")


def _last(data: bytes) -> bytes:
    """The line that says where the invocation is: the last complete one (a torn tail is
    an outcome a power cut cut short); a file with no newline at all is one document, as
    stages were before they were lines."""
    lines, _ = files.split_complete(data)
    return lines[-1] if lines else data


def parse(data: bytes | None) -> Read:
    """A stored record's meaning, checked against nothing but itself."""
    if data is None:
        return Read("absent")
    if len(data) > MAX_STAGE_BYTES:
        return Read("bad")
    data = _last(data)
    try:
        head = msgspec.json.decode(data, type=_Head)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Read("bad", raw=data)
    if head.schema != STAGE_SCHEMA:
        older = head.schema.startswith(STAGE_PREFIX) and head.schema < STAGE_SCHEMA
        return Read("older" if older else "bad", raw=data)
    try:
        stage = msgspec.json.decode(data, type=StageFile)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Read("bad", raw=data)
    if stage.state == "staged" and (
        stage.packet is None or stage.digest != page_digest(stage.packet, stage.folders)
    ):
        return Read("bad", raw=data)
    return Read("current", stage, data)


def read(stages: ModelStages, owner: str, window: Window, source_generation: int) -> Read:
    """Where the owner-day's invocation is, as ``stages`` holds it."""
    try:
        got = parse(stages.load(owner, window.local_date))
    except OSError:
        return Read("bad")
    stage = got.stage
    if stage is not None and (
        stage.owner != owner
        or stage.local_date != window.local_date
        or stage.window_id != window.window_id
        or stage.source_generation != source_generation
    ):
        return Read("bad", raw=got.raw)
    return got


def encode(stage: StageFile) -> bytes:
    """A record as the stages keep it (one JSON line, no newline)."""
    return _encoder.encode(stage)


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def held(stages: ModelStages, stage: StageFile) -> Verdict:
    """An ``invoked`` mark's verdict now (``sweep.holder``)."""
    return verdict(
        None if stage.lease_until is None else _utc(stage.lease_until),
        _utc(stages.now()),
        liveness(stage.holder),
    )


def mark(stages: ModelStages, stage: StageFile, lease: timedelta = DEFAULT_LEASE) -> bool:
    """The ``invoked`` record, durably, held by this process for twice ``lease``; or the
    day's mark taken over when its lease ran out and its holder is gone. False (nothing
    written) when the day has a record that is not free to take."""
    now = _utc(stages.now())
    record = msgspec.structs.replace(
        stage, state="invoked", holder=this_process(), since=now, lease_until=now + 2 * lease
    )
    if stages.mark(stage.owner, stage.local_date, encode(record)):
        return True
    try:
        got = parse(stages.load(stage.owner, stage.local_date))
    except OSError:
        return False
    old = got.stage
    if old is None or old.state != "invoked" or held(stages, old) != "expired":
        return False
    return stages.replace(stage.owner, stage.local_date, got.raw, encode(record), "invoked")


def _ours(stages: ModelStages, stage: StageFile) -> Read | None:
    """The day's record while it is still ``stage``'s invocation's mark, else None."""
    try:
        got = parse(stages.load(stage.owner, stage.local_date))
    except OSError:
        return None
    old = got.stage
    if old is None or old.state != "invoked" or old.invocation != stage.invocation:
        return None
    return got


def renew(stages: ModelStages, stage: StageFile, lease: timedelta = DEFAULT_LEASE) -> None:
    """Before a model request: make sure our mark is held for at least ``lease`` more
    (extended to twice that when less is left); SweepFencedError
    (``invocation_taken_over``) when the day is no longer ours to call the model for."""
    got = _ours(stages, stage)
    if got is not None and got.stage is not None:
        now = _utc(stages.now())
        until = got.stage.lease_until
        if until is not None and _utc(until) - now >= lease:
            return
        record = msgspec.structs.replace(got.stage, lease_until=now + 2 * lease)
        if stages.replace(stage.owner, stage.local_date, got.raw, encode(record), "invoked"):
            return
    raise SweepFencedError(stage.owner, "invocation_taken_over")


def outcome(stages: ModelStages, stage: StageFile) -> bool:
    """The invocation's outcome (``staged`` or ``failed``), only while the day's record is
    still its mark; False: refused (another run took the day over)."""
    got = _ours(stages, stage)
    if got is None:
        return False
    return stages.replace(stage.owner, stage.local_date, got.raw, encode(stage), stage.state)


def drop(stages: ModelStages, stage: StageFile) -> bool:
    """Forget our mark (its invocation never reached the model), only while it is ours."""
    got = _ours(stages, stage)
    return got is not None and stages.remove(stage.owner, stage.local_date, got.raw)


def release_own(stages: ModelStages, owner: str) -> int:
    """Remove the ``invoked`` marks this process holds for ``owner`` (a stopping worker,
    whose model calls have been cancelled): another run may invoke at once. How many."""
    me = this_process()
    done = 0
    for day in stages.days(owner):
        try:
            got = parse(stages.load(owner, day))
        except OSError:
            continue
        s = got.stage
        if s is not None and s.state == "invoked" and s.holder == me:
            done += stages.remove(owner, day, got.raw)
    return done


class FileStages:
    """``ModelStages`` in the home's files (see the module's docstring)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def now(self) -> datetime:
        return datetime.now(UTC)

    @contextlib.contextmanager
    def _locked(self, owner: str, local_date: date) -> Iterator[Path]:
        path = path_of(self.home, owner, local_date)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path.parent / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield path
        finally:
            os.close(fd)

    def load(self, owner: str, local_date: date) -> bytes | None:
        try:
            return path_of(self.home, owner, local_date).read_bytes()
        except FileNotFoundError:
            return None

    def days(self, owner: str) -> list[date]:
        folder = self.home.joinpath(*STAGE_DIR, owner)
        out = []
        for p in sorted(folder.glob("*.json")):
            with contextlib.suppress(ValueError):
                out.append(date.fromisoformat(p.stem))
        return out

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        with self._locked(owner, local_date) as path:
            if path.exists():
                return False
            files.write_atomic(path, record + b"\n", mode=0o600)
            return True

    def replace(
        self, owner: str, local_date: date, expected: bytes, record: bytes, state: str
    ) -> bool:
        """Append ``record`` while the last complete line is ``expected`` (a torn tail is
        cut first); fsynced for a mark, not for an outcome (see the module's docstring)."""
        with self._locked(owner, local_date) as path:
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            except FileNotFoundError:
                return False
            try:
                data = b""
                while chunk := os.read(fd, 1 << 20):
                    data += chunk
                if _last(data) != expected:
                    return False
                _, end = files.split_complete(data)
                if end == 0:  # one document with no newline: the record it held ends it
                    end = len(data)
                    os.lseek(fd, end, os.SEEK_SET)
                    os.write(fd, b"\n")
                    end += 1
                os.ftruncate(fd, end)
                os.lseek(fd, end, os.SEEK_SET)
                view = memoryview(record + b"\n")
                while view:
                    view = view[os.write(fd, view) :]
                if state == "invoked":
                    os.fsync(fd)
            finally:
                os.close(fd)
            return True

    def remove(self, owner: str, local_date: date, expected: bytes) -> bool:
        with self._locked(owner, local_date) as path:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return False
            if _last(data) != expected:
                return False
            path.unlink()
            return True
