"""The model pass's stage: the at-most-once record of one owner-day's invocation, behind
the ``ModelStages`` port. A home keeps it in a file (``FileStages``,
``<home>/sweep/stage/<owner>/<local-date>.json``); a sweep worker, which has no home, in
the store (``stores.postgres_sweep_stage``: ``invoked`` committed before the first model
request, the outcome committed after, the same records, read by the same ``read``).

In a file: JSON lines, the last complete one
saying where the invocation is. One durable write per owner-day: the file is created
atomically (temp file, fsync, rename, fsync of the folder) holding ``invoked`` (with the
invocation id) before the first model request, so no crash or power cut after that
request can lose it. The outcome is appended as one more line, with no fsync of its own:
``staged`` with the full candidate page (the day's packet, folder assignments, counts)
and its digest before any candidate applies, or ``failed`` with a reason code when the
invocation produced no usable page. A killed process loses nothing the kernel was given;
a power cut can lose or tear that last line, and a torn tail is not read, so the file
still says ``invoked``: the day stays incomplete, and the model is not called twice (the
runner commits the staged packet to the store, durably, right after the append, so that
window is milliseconds). A retry reads it and never calls the model again:

- ``staged``: the exact page, checked against its digest;
- ``invoked`` (a crash mid-call), ``failed``, unreadable or a digest that does not match:
  the day stays incomplete with a reason (``stage_missing``, the failure's reason,
  ``stage_malformed``); the runbook says how an operator re-opens it;
- a stage of an older ``tether_sweep_daily_summary_stage.*`` schema (a deployment
  boundary): that deployment owned the window's invocation and its apply, so the reader
  attests an empty page and the cursor advances.

Everything in it was redacted before it was written (``scan``).
"""

from __future__ import annotations

import hashlib
import os
from datetime import date
from pathlib import Path
from typing import Literal

import msgspec

from tether import files
from tether.core.sweep.packet import DailySweepInput
from tether.core.sweep.windows import Window
from tether.ports import ModelStages
from tether.records import FolderAssignment

STAGE_DIR = ("sweep", "stage")
STAGE_PREFIX = "tether_sweep_daily_summary_stage."
STAGE_SCHEMA = STAGE_PREFIX + "v2"
MAX_STAGE_BYTES = 2_000_000

StageState = Literal["invoked", "staged", "failed"]


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


class _Head(msgspec.Struct):
    schema: str = ""


_encoder = msgspec.json.Encoder(order="sorted")


def page_digest(packet: DailySweepInput, folders: tuple[FolderAssignment, ...]) -> str:
    return hashlib.sha256(_encoder.encode((packet, folders))).hexdigest()


class Read(msgspec.Struct, frozen=True):
    """What a stage says: ``absent``, ``older`` (attest empty), ``bad`` (malformed), or a
    stage of this schema."""

    kind: Literal["absent", "older", "bad", "current"]
    stage: StageFile | None = None


def path_of(home: Path, owner: str, local_date: date) -> Path:
    return home.joinpath(*STAGE_DIR, owner, f"{local_date.isoformat()}.json")


def _last(data: bytes) -> bytes:
    """The line that says where the invocation is: the last complete one (a torn tail is
    an outcome a power cut cut short); a file with no newline at all is one document, as
    stages were before they were lines."""
    lines, _ = files.split_complete(data)
    return lines[-1] if lines else data


def read(stages: ModelStages, owner: str, window: Window, source_generation: int) -> Read:
    """Where the owner-day's invocation is, as ``stages`` holds it."""
    try:
        data = stages.load(owner, window.local_date)
    except OSError:
        return Read("bad")
    if data is None:
        return Read("absent")
    if len(data) > MAX_STAGE_BYTES:
        return Read("bad")
    data = _last(data)
    try:
        head = msgspec.json.decode(data, type=_Head)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Read("bad")
    if head.schema != STAGE_SCHEMA:
        older = head.schema.startswith(STAGE_PREFIX) and head.schema < STAGE_SCHEMA
        return Read("older" if older else "bad")
    try:
        stage = msgspec.json.decode(data, type=StageFile)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Read("bad")
    if (
        stage.owner != owner
        or stage.local_date != window.local_date
        or stage.window_id != window.window_id
        or stage.source_generation != source_generation
    ):
        return Read("bad")
    if stage.state == "staged" and (
        stage.packet is None or stage.digest != page_digest(stage.packet, stage.folders)
    ):
        return Read("bad")
    return Read("current", stage)


def encode(stage: StageFile) -> bytes:
    """A record as the stages keep it (one JSON line, no newline)."""
    return _encoder.encode(stage)


def mark(stages: ModelStages, stage: StageFile) -> bool:
    """The ``invoked`` record, durably; False when the day has one already."""
    return stages.mark(stage.owner, stage.local_date, encode(stage))


def outcome(stages: ModelStages, stage: StageFile) -> None:
    """The invocation's outcome (``staged`` or ``failed``)."""
    stages.settle(stage.owner, stage.local_date, stage.state, encode(stage))


class FileStages:
    """``ModelStages`` in the home's files (see the module's docstring)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def load(self, owner: str, local_date: date) -> bytes | None:
        try:
            return path_of(self.home, owner, local_date).read_bytes()
        except FileNotFoundError:
            return None

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        path = path_of(self.home, owner, local_date)
        if path.exists():
            return False
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        files.write_atomic(path, record + b"\n", mode=0o600)
        return True

    def settle(self, owner: str, local_date: date, state: str, record: bytes) -> None:
        """Appended, with no fsync: see the module's docstring for why a lost line is
        safe."""
        del state  # the record says it
        fd = os.open(
            path_of(self.home, owner, local_date), os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
        )
        try:
            view = memoryview(record + b"\n")
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def drop(self, owner: str, local_date: date) -> None:
        path_of(self.home, owner, local_date).unlink(missing_ok=True)
