"""Ports: every Protocol an adapter implements, in one package. Records crossing them are
typed, never dicts, and live in ``tether.records`` (memory, inference) or ``tether.core``
(the sweep's state and packets): the package imports vocabulary only.

- ``basics``: ``Clock`` (where the time comes from; tests pass a stepping clock) and
  ``Progress`` (where a long job says how far it got).
- ``store``: ``Store``, everything durable that is not a session log, cut into the role
  ports its consumers are typed on (``LogIndex``, ``TextSearch``, ``RecallLog``,
  ``MemoryJournal``, ``NoteStore``, ``PageStore``, ``IdentityIndex``, ``FactIndex``,
  ``StoredCells``, ``SpendLedger``, ``SessionMetas``, ``DayLog``) and the slices some
  consumers use together (``RecallStore``, ``MemoryStore``, ``SweepDayStore`` ...);
  ``StoreOpener``, how a use-case gets a store it may not need.
- ``sweep``: ``SweepStore`` / ``SweepTx`` (the daily sweep's owners, cursors, receipts,
  facts and journal, read and written only inside its transactions), ``OwnerClaims`` and
  ``ClaimingStore`` (owner-days that sweep workers share out), ``Producer`` (what gives
  the sweep a day's packet), ``ModelStages`` (the model pass's at-most-once record of each
  owner-day's invocation).
- ``models``: ``Llm`` (an inference backend), ``Embedder`` / ``VectorIndex`` (sentence
  vectors for recall: the model that makes them, and where they are kept and searched).

``from tether.ports import X`` names any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.ports.basics import Clock, Progress
from tether.ports.models import Embedder, Llm, VectorIndex
from tether.ports.store import (
    DayLog,
    FactIndex,
    IdentityIndex,
    IdentityStore,
    ImportStore,
    IndexStore,
    LogIndex,
    MemoryJournal,
    MemoryStore,
    NoteStore,
    NoteWriter,
    PageStore,
    PageWriter,
    RecallLog,
    RecallStore,
    ScanStore,
    SessionMetas,
    SpendLedger,
    Store,
    StoredCells,
    StoreOpener,
    SweepDayStore,
    TextSearch,
    TierStore,
    TurnReader,
)
from tether.ports.sweep import (
    ClaimingStore,
    ModelStages,
    OwnerClaims,
    Producer,
    SweepStore,
    SweepTx,
)

if TYPE_CHECKING:
    from tether.ports.models import Matrix

__all__ = [
    "ClaimingStore",
    "Clock",
    "DayLog",
    "Embedder",
    "FactIndex",
    "IdentityIndex",
    "IdentityStore",
    "ImportStore",
    "IndexStore",
    "Llm",
    "LogIndex",
    "Matrix",
    "MemoryJournal",
    "MemoryStore",
    "ModelStages",
    "NoteStore",
    "NoteWriter",
    "OwnerClaims",
    "PageStore",
    "PageWriter",
    "Producer",
    "Progress",
    "RecallLog",
    "RecallStore",
    "ScanStore",
    "SessionMetas",
    "SpendLedger",
    "Store",
    "StoreOpener",
    "StoredCells",
    "SweepDayStore",
    "SweepStore",
    "SweepTx",
    "TextSearch",
    "TierStore",
    "TurnReader",
    "VectorIndex",
]
