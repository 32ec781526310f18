"""The in-memory vector matrix (stores/vector_matrix.py): its exact int8 search ranks as
the float32 product of the decoded vectors did (the search before it), masks and squeezes
what is gone, and refuses vectors out of order."""

from __future__ import annotations

from typing import Any

import pytest

np = pytest.importorskip("numpy")

from tether.stores import vector_matrix as vm  # noqa: E402


def _corpus(n: int, dim: int = 48, seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """Unit vectors in clusters (many near-ties near any cut-off), stored as int8, with a
    doc id per vector (some docs have several parts)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dim)).astype(np.float32)
    vecs = centres[rng.integers(0, 12, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs = np.sort(rng.integers(1, n // 2 + 2, n)).astype(np.int64)
    codes, scales = [], []
    for v in vecs:
        scale, blob = vm.encode(v)
        codes.append(np.frombuffer(blob, dtype=np.int8))
        scales.append(scale)
    return np.stack(codes), np.array(scales, dtype=np.float32), docs, centres


def _float32_search(codes: Any, scales: Any, docs: Any, q: Any, k: int) -> list[tuple[int, float]]:
    """What sqlite_vectors did before the int8 matrix: decode to float32, one product,
    the best 3 k vectors, each doc at its best."""
    matrix = codes.astype(np.float32) * scales[:, None]
    scores = matrix @ q
    want = min(len(scores), 3 * k)
    top = np.argpartition(-scores, want - 1)[:want]
    top = top[np.argsort(-scores[top], kind="stable")]
    best: dict[int, float] = {}
    for i in top:
        best.setdefault(int(docs[i]), float(scores[i]))
    return list(best.items())[:k]


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same docs in the same order, but for two scores equal to float32 rounding
    (the two products round differently in the last bit) swapping places."""
    assert len(got) == len(want)
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    score = dict(want) | dict(got)
    for (a, _), (b, _) in zip(got, want, strict=True):
        assert a == b or abs(score[a] - score[b]) < 1e-6, (a, b)
    last = min(s for _, s in want)
    assert {d for d, s in got if s > last + 1e-6} == {d for d, s in want if s > last + 1e-6}


@pytest.mark.parametrize("first_pass", ["simd", "simd-two-threads", "numpy"])
def test_the_int8_search_ranks_as_the_float32_product(
    first_pass: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if first_pass == "numpy":
        monkeypatch.setattr(vm, "_simd", None)
    elif vm._simd is None:
        pytest.skip("numkong is not installed")
    elif first_pass == "simd-two-threads":
        monkeypatch.setattr(vm, "_TWO_THREADS_AT", 1000)
    codes, scales, docs, centres = _corpus(6000)
    m = vm.VectorMatrix()
    ids = np.arange(1, len(docs) + 1) * 3
    m.append(ids[:4000], docs[:4000], codes[:4000], scales[:4000])
    m.append(ids[4000:], docs[4000:], codes[4000:], scales[4000:])
    assert len(m) == 6000
    assert m.last == int(ids[-1])
    assert m.dim == codes.shape[1]
    rng = np.random.default_rng(1)
    for t in range(25):
        q = centres[t % 12] + 0.5 * rng.standard_normal(codes.shape[1]).astype(np.float32)
        q /= np.linalg.norm(q)
        for k in (1, 10, 200):
            _same(m.nearest(q, k), _float32_search(codes, scales, docs, q, k))


def test_only_some_docs_and_masked_vectors_are_left_out() -> None:
    codes, scales, docs, centres = _corpus(3000, seed=2)
    m = vm.VectorMatrix()
    ids = np.arange(1, 3001)
    m.append(ids, docs, codes, scales)
    q = centres[3] / np.linalg.norm(centres[3])
    some = sorted({int(d) for d in docs[::7]})
    sel = np.isin(docs, some)
    _same(m.nearest(q, 20, docs=some), _float32_search(codes[sel], scales[sel], docs[sel], q, 20))
    assert m.nearest(q, 5, docs=[]) == []

    first = [d for d, _ in m.nearest(q, 5)]
    assert m.drop_docs(first[:2]) == int(np.isin(docs, first[:2]).sum())
    keep = ~np.isin(docs, first[:2])
    _same(m.nearest(q, 50), _float32_search(codes[keep], scales[keep], docs[keep], q, 50))

    # The table lost a quarter of its vectors: masked, then squeezed out.
    still = ids[keep][: int(keep.sum() * 0.7)]
    assert m.keep_only(still) == int(keep.sum()) - len(still)
    assert len(m) == len(still)
    assert np.array_equal(m.ids(), still)
    sel = np.isin(ids, still)
    _same(m.nearest(q, 50), _float32_search(codes[sel], scales[sel], docs[sel], q, 50))
    # Appending after a squeeze goes on from the last id held before it.
    more, more_scales, more_docs, _ = _corpus(10, seed=3)
    m.append(np.arange(5001, 5011), more_docs + 10_000, more, more_scales)
    assert len(m) == len(still) + 10
    assert m.last == 5010


def test_vectors_out_of_order_or_of_another_size_are_refused() -> None:
    codes, scales, docs, _ = _corpus(10)
    m = vm.VectorMatrix()
    m.append(np.arange(5, 15), docs, codes, scales)
    with pytest.raises(ValueError, match="ascend"):
        m.append([14], [1], codes[:1], scales[:1])
    with pytest.raises(ValueError, match="values in a matrix"):
        m.append([20], [1], np.zeros((1, 7), dtype=np.int8), [1.0])
    with pytest.raises(ValueError, match="at least 1"):
        m.nearest(np.ones(codes.shape[1], dtype=np.float32), 0)
    m.clear()
    assert len(m) == 0
    assert m.last == 0
    assert m.nearest(np.ones(codes.shape[1], dtype=np.float32), 3) == []


def test_a_float32_blob_is_read_as_int8() -> None:
    v = np.linspace(-1, 1, 16, dtype=np.float32)
    scale, blob = vm.encode(v, "float32")
    codes, s = vm.decode("float32", scale, blob)
    assert codes.dtype == np.int8
    assert np.allclose(codes * s, v, atol=0.5 / 127)
    m = vm.VectorMatrix()
    m.append_stored([(1, 7, "float32", scale, blob), (2, 8, "int8", *vm.encode(-v))])
    assert [d for d, _ in m.nearest(v, 2)] == [7, 8]
