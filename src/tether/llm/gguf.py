"""The context a GGUF model was trained on, read from the file's own metadata.

A GGUF file opens with its key-value metadata (``general.architecture`` = ``llama``, then
``llama.context_length`` = 8192 for SmolLM2-135M, ...). Reading just that header needs no
llama-cpp-python and no model load, so ``tether init``, ``config check`` and ``doctor`` can
say when ``[expect] n_ctx`` is past what the model can attend to, and the agent compacts at
the smaller of the two (``effective_n_ctx``). Only the header is read, value by value (the
tokenizer's arrays are skipped, not decoded), stopping as soon as the answer is known.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tether.config import Config
from tether.errors import EmbeddedModelError, TetherError

_MAGIC = b"GGUF"
#: GGUF value type -> struct format of a scalar (8 string, 9 array are handled apart).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
_SCALARS |= {10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: More metadata pairs than any real model has: a corrupt count is refused, not looped on.
_MAX_PAIRS = 1 << 20


@dataclass(frozen=True)
class TrainedContext:
    """What the model file says: its architecture and the context it was trained on
    (None: the file does not say)."""

    path: Path
    architecture: str | None
    n_ctx_train: int | None


def _read(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ValueError("the file ends inside its metadata")
    return data


def _u64(stream: BinaryIO) -> int:
    return int(struct.unpack("<Q", _read(stream, 8))[0])


def _string(stream: BinaryIO) -> bytes:
    return _read(stream, _u64(stream))


def _skip(stream: BinaryIO, kind: int) -> None:
    if kind in _SCALARS:
        stream.seek(struct.calcsize(_SCALARS[kind]), 1)
    elif kind == _STRING:
        stream.seek(_u64(stream), 1)
    elif kind == _ARRAY:
        item = int(struct.unpack("<I", _read(stream, 4))[0])
        count = _u64(stream)
        if item in _SCALARS:
            stream.seek(struct.calcsize(_SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _skip(stream, item)
    else:
        raise ValueError(f"unknown metadata value type {kind}")


def _value(stream: BinaryIO, kind: int) -> int | str | None:
    if kind == _STRING:
        return _string(stream).decode("utf-8", "replace")
    if kind in _SCALARS and kind not in (6, 7, 12):
        return int(struct.unpack(_SCALARS[kind], _read(stream, struct.calcsize(_SCALARS[kind])))[0])
    _skip(stream, kind)
    return None


def read_trained_context(path: Path) -> TrainedContext:
    """The model's architecture and ``<architecture>.context_length``; EmbeddedModelError
    for a file that is not GGUF or whose header is cut short."""
    try:
        with path.open("rb") as f:
            if _read(f, 4) != _MAGIC:
                raise ValueError("not a GGUF file (no GGUF magic)")
            version = int(struct.unpack("<I", _read(f, 4))[0])
            if version < 2:
                raise ValueError(f"GGUF version {version} is not supported (2 or later)")
            _u64(f)  # tensor count
            pairs = _u64(f)
            if pairs > _MAX_PAIRS:
                raise ValueError(f"implausible metadata count {pairs}")
            arch: str | None = None
            lengths: dict[str, int] = {}
            for _ in range(pairs):
                name = _string(f).decode("utf-8", "replace")
                kind = int(struct.unpack("<I", _read(f, 4))[0])
                wanted = name == "general.architecture" or name.endswith(".context_length")
                value = _value(f, kind) if wanted else None
                if not wanted:
                    _skip(f, kind)
                if name == "general.architecture" and isinstance(value, str):
                    arch = value
                elif isinstance(value, int) and name.endswith(".context_length"):
                    lengths[name.removesuffix(".context_length")] = value
                if arch is not None and arch in lengths:
                    break
    except OSError as exc:
        raise EmbeddedModelError(path, f"cannot read: {exc.strerror or exc}") from None
    except (ValueError, struct.error) as exc:
        raise EmbeddedModelError(path, f"cannot read its metadata: {exc}") from None
    return TrainedContext(path, arch, lengths.get(arch) if arch is not None else None)


def effective_n_ctx(n_ctx: int, trained: int | None) -> int:
    """The context the agent plans with: ``[expect] n_ctx``, or the model's trained
    context when that is smaller (a model attends poorly past it)."""
    return n_ctx if trained is None else min(n_ctx, trained)


def context_warning(n_ctx: int, trained: TrainedContext) -> str | None:
    """A line for the owner when ``[expect] n_ctx`` is past the model's trained context."""
    if trained.n_ctx_train is None or n_ctx <= trained.n_ctx_train:
        return None
    return (
        f"[expect] n_ctx = {n_ctx} exceeds the context {trained.path.name} was trained on "
        f"({trained.n_ctx_train}, its {trained.architecture}.context_length): compaction "
        f"plans with {trained.n_ctx_train}; set [expect] n_ctx = {trained.n_ctx_train} or less"
    )


def model_context(config: Config) -> TrainedContext | None:
    """The embedded model's header as configured (None for a server backend, or for a
    model file that cannot be found or read: loading it says why)."""
    if config.llm.backend != "embedded":
        return None
    from tether.llm.embedded import resolve_model_path

    try:
        return read_trained_context(resolve_model_path(config.llm.model_path))
    except TetherError:
        return None


def config_warning(config: Config) -> str | None:
    """``context_warning`` for the configured embedded model, if any."""
    trained = model_context(config)
    return None if trained is None else context_warning(config.expect.n_ctx, trained)


def planned_n_ctx(config: Config) -> int:
    """``effective_n_ctx`` for the configured backend."""
    trained = model_context(config)
    return effective_n_ctx(config.expect.n_ctx, None if trained is None else trained.n_ctx_train)
