"""Vector recall beside the lexical one: the question embedded once, its nearest rows,
and the two rankings fused (``core.recall.ranking.blend``). What ``recall`` and
``recall_sessions`` run when they are handed a ``Vectors``; without one they are lexical.

- ``Vectors``: an ``Embedder`` and a ``VectorIndex`` (the composition root builds them:
  ``daemon.vectors.open_vectors``), and whether every row that takes a vector has one
  from this model. Incomplete, recall stays lexical (``doctor`` says so) until
  ``tether memory reindex --vectors`` or the daemon's indexer catches up.
- ``parts``: how a row's text is cut for the model (it reads 256 WordPiece tokens): whole
  up to ``PART_WORDS`` words, else in overlapping parts, at most ``MAX_PARTS``; a row
  scores by its best part. A reply is embedded by its opening ``REPLY_WORDS`` words only:
  what a reply is about shows there, what is asked about later is the owner's words, and
  whole replies (five times the owner's words on LongMemEval) cost four times the time.
- Asking: a question's vector is kept (``ASKED`` of them, the last asked), so an agent that
  asks again skips the model; ``beside`` runs recall's lexical search on the ``Vectors``'
  own worker thread while the caller embeds the question and searches its nearest rows
  (the model, faiss and SQLite let go of the GIL: the two overlap on two cores).
- ``embed_missing``: the indexer's loop, shared by the daemon and the CLI: rows without a
  vector, in id order, in batches, each batch committed (a kill loses at most one batch
  and re-embeds nothing done), then the index's ``maintain`` (at scale, the approximate
  graph that keeps searches from reading every vector).

No LLM is called at query time: the embedder is a small local model.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from tether.core.recall import ranking
from tether.core.recall.periods import Period
from tether.ports import Embedder, Progress, VectorIndex
from tether.records import Found, VectorCounts

if TYPE_CHECKING:
    from tether.ports import Matrix

T = TypeVar("T")

#: Words of a row embedded whole; a longer row is cut in parts of this many words.
PART_WORDS = 160
#: Words two neighbouring parts share, so a sentence cut in two is whole in one of them.
PART_OVERLAP = 20
#: Parts of one row at most (the rest of a very long paste is left to lexical recall).
MAX_PARTS = 4
#: Words of a reply (assistant text) embedded.
REPLY_WORDS = 64
#: The least cosine a row found by vector needs to be a candidate at all: 0.0 drops only
#: rows pointing away from the question. A floor for every row (0.25) cost the LongMemEval
#: tuning half session R@5 0.956 -> 0.911 and turn R@10 0.889 -> 0.822 (short questions
#: sit below it beside their evidence); the floors that keep a question related to
#: nothing from recalling the nearest unrelated turns are ``core.recall.ranking.supported``'s,
#: which look at what the question's words found.
MIN_COSINE = 0.0
#: Rows the question's nearest-neighbour search returns.
POOL = 200
#: Rows embedded per batch (one transaction each).
BATCH_ROWS = 64
#: Questions whose vectors a ``Vectors`` keeps, the last asked: an agent asks again what
#: it asked a few turns before, and the model costs ~8 ms of CPU a question (the vectors
#: are the model's own, bit for bit: a kept one ranks as a fresh one). 384 floats each.
ASKED = 256


@dataclass
class Vectors:
    """The embedder, the index, and whether the index is complete for the embedder's model."""

    embedder: Embedder
    index: VectorIndex
    counts: VectorCounts = field(default_factory=lambda: VectorCounts(0, 0))
    #: Held while a recall embeds missing rows (``memory.readiness``): one pass at a time.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _asked: OrderedDict[str, Matrix] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )
    _asked_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )
    _worker: ThreadPoolExecutor | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.refresh()

    @property
    def model(self) -> str:
        return self.embedder.model_id

    @property
    def complete(self) -> bool:
        return self.counts.complete

    def refresh(self) -> VectorCounts:
        self.counts = self.index.vector_counts(self.model)
        return self.counts

    def nearest(self, text: str, limit: int, only: Sequence[str] | None = None) -> list[Found]:
        """The rows nearest ``text`` (cosine in ``score``, at least ``MIN_COSINE``), best
        first."""
        return self._nearest(self.embed_question(text), limit, only)

    def embed_question(self, text: str) -> Matrix:
        """``text``'s vector (one row), kept for the next ``ASKED`` questions."""
        with self._asked_lock:
            kept = self._asked.get(text)
            if kept is not None:
                self._asked.move_to_end(text)
                return kept
        vector = self.embedder.embed([text])
        vector.setflags(write=False)  # shared by every recall that asks it again
        with self._asked_lock:
            self._asked[text] = vector
            while len(self._asked) > ASKED:
                self._asked.popitem(last=False)
        return vector

    def forget_asked(self) -> None:
        """Keep no question's vector (the next ask of each runs the model)."""
        with self._asked_lock:
            self._asked.clear()

    def beside(self, work: Callable[[], T]) -> Future[T]:
        """``work()`` begun on this ``Vectors``' worker thread (one, made on first use,
        taking one job at a time), for the caller to embed and search meanwhile (recall's
        lexical search); its errors are raised by ``result()``."""
        with self._asked_lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="tether-recall-beside")
            worker = self._worker
        return worker.submit(work)

    def _nearest(self, query: Matrix, limit: int, only: Sequence[str] | None) -> list[Found]:
        found = self.index.nearest(self.model, query, limit, only=only)
        return [f for f in found if f.score >= MIN_COSINE]


def parts(text: str, field: str | None = None) -> list[str]:
    """The pieces of ``text`` (a row of ``field``) the model is given (the module's doc)."""
    words = text.split()
    if field == "assistant":
        return [" ".join(words[:REPLY_WORDS]) if len(words) > REPLY_WORDS else text]
    if len(words) <= PART_WORDS:
        return [text]
    step = PART_WORDS - PART_OVERLAP
    out = []
    for start in range(0, len(words), step):
        out.append(" ".join(words[start : start + PART_WORDS]))
        if start + PART_WORDS >= len(words) or len(out) == MAX_PARTS:
            break
    return out


def embed_missing(
    vectors: Vectors,
    *,
    limit: int | None = None,
    progress: Progress | None = None,
    batch: int = BATCH_ROWS,
    after_batch: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Embed rows that have no vector from the model, in id order, a batch per
    transaction; at most ``limit`` rows (None: all). Rows embedded; ``after_batch`` is
    called with the running count after each commit (the fault points of the crash
    tests sit there); ``stop`` is asked before each batch (a hook out of time)."""
    done = 0
    after = 0
    if progress is not None:
        counts = vectors.refresh()
        progress.stage("embedding rows", max(counts.total - counts.done, 0))
    while limit is None or done < limit:
        if stop is not None and stop():
            break
        want = batch if limit is None else min(batch, limit - done)
        rows = vectors.index.missing_vectors(vectors.model, want, after=after)
        if not rows:
            break
        pieces = [parts(r.text, r.field) for r in rows]
        flat = [p for ps in pieces for p in ps]
        matrix = vectors.embedder.embed(flat)
        out = []
        at = 0
        for r, ps in zip(rows, pieces, strict=True):
            out.append((r.doc, matrix[at : at + len(ps)]))
            at += len(ps)
        vectors.index.put_vectors(vectors.model, out, texts={r.doc: r.text for r in rows})
        after = rows[-1].doc
        done += len(rows)
        if progress is not None:
            progress.advance(len(rows))
        if after_batch is not None:
            after_batch(done)
    vectors.index.maintain(vectors.model, progress=progress)
    vectors.refresh()
    return done


def vector_turns(
    found: Sequence[Found], period: Period | None, *, aside: float | None = None
) -> list[ranking.Scored]:
    """Rows found by vector, one ``Scored`` per turn (or note, page): its best row's cosine
    (replies and tool output at ``aside``), boosted in the period the question names."""
    return ranking.fold_best(found, period, ranking.PERIOD_BOOST, aside=aside)
