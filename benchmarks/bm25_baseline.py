"""The plain-BM25 baseline the recall benchmarks compare against: bm25s (Lucene BM25, k1 1.5,
b 0.75, English stop words, no stemming) over one document per turn, the index built once.
"""

from __future__ import annotations

from collections.abc import Sequence


def bm25_keys(
    docs: Sequence[tuple[str, str]], questions: Sequence[tuple[str, str]], depth: int
) -> dict[str, list[str]]:
    """For each ``(question id, question)``, the keys of ``docs`` (``(key, text)``) that share a
    word with it, best first, at most ``depth`` of them. A question none of whose words is in
    the index gets none (bm25s would otherwise rank every document at 0)."""
    import bm25s  # the optional extra "bench"

    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([t for _, t in docs], stopwords="en", show_progress=False),
        show_progress=False,
    )
    vocab = retriever.vocab_dict
    out: dict[str, list[str]] = {}
    for qid, question in questions:
        words = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
        known = [[w for w in words[0] if w in vocab]]
        if not known[0]:
            out[qid] = []
            continue
        found, scores = retriever.retrieve(known, k=min(depth, len(docs)), show_progress=False)
        out[qid] = [docs[int(i)][0] for i, s in zip(found[0], scores[0], strict=True) if s > 0]
    return out
