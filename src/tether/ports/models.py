"""The models' ports: an inference backend (``Llm``), and sentence vectors for recall (the
extra tether[vectors]): the model that makes them (``Embedder``) and where they are kept
and searched (``VectorIndex``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from tether.ports.basics import Progress
from tether.records import Completion, CompletionRequest, Found, VecSource, VectorCounts

if TYPE_CHECKING:  # numpy comes with the extra tether[vectors]; only its types are named here
    import numpy as np
    import numpy.typing as npt

    #: Rows of L2-normalised float32 vectors, one per text.
    Matrix = npt.NDArray[np.float32]


class Llm(Protocol):
    """An inference backend. Errors are always ``tether.errors.LlmError`` subclasses."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one completion; raises ContextFullError when the prompt does not fit."""
        ...

    async def aclose(self) -> None:
        """Release connections; the backend is unusable afterwards."""
        ...


class Embedder(Protocol):
    """A sentence-embedding model, run in process and offline (``llm.embedder``). Texts
    in, one L2-normalised float32 row per text out; ``model_id`` names the model and its
    version, so the vectors it made are told from another model's."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """An ``(len(texts), dim)`` array; raises ``EmbedderError``."""
        ...


class VectorIndex(Protocol):
    """Where the vectors of indexed rows are kept and searched (``stores.sqlite.vectors``).
    A row's vectors go when the row goes or its text is rewritten."""

    def close(self) -> None: ...

    def vector_counts(self, model: str) -> VectorCounts:
        """Rows that take a vector (every indexed row but tool calls) and how many have
        one from ``model``."""
        ...

    def missing_vectors(self, model: str, limit: int, *, after: int = 0) -> list[VecSource]:
        """Up to ``limit`` rows (doc id above ``after``, in id order) with no vector from
        ``model``."""
        ...

    def put_vectors(
        self,
        model: str,
        rows: Sequence[tuple[int, Matrix]],
        *,
        texts: Mapping[int, str] | None = None,
    ) -> None:
        """Store each doc id's vectors (one row per part of its text), replacing any it
        had, in one transaction; a doc id no longer indexed is skipped, and so, given
        ``texts`` (each doc's text as embedded), is one whose text changed since (a
        redaction raced the embedding: the old text's vector must not be kept; the row
        stays missing and is embedded afresh)."""
        ...

    def nearest(
        self, model: str, query: Matrix, limit: int, *, only: Sequence[str] | None = None
    ) -> list[Found]:
        """The ``limit`` rows whose best part is nearest ``query`` (one vector), best first,
        ``score`` the cosine similarity; among the rows of the refs ``only`` if given."""
        ...

    def maintain(self, model: str, *, progress: Progress | None = None) -> int:
        """Bring what speeds up ``nearest`` in step with ``model``'s vectors (the
        approximate graph at scale; nothing below it), off the query path; the vectors
        it took in."""
        ...
