"""The model's trained context from its GGUF header (tether.llm.gguf), and what init,
config check, doctor and the agent do with it. Model files here are written by the test
(real GGUF headers, no weights); the real SmolLM2 checks are in test_embedded.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon_helpers import tether
from tether.config import load_config
from tether.errors import EmbeddedModelError
from tether.llm.gguf import (
    context_warning,
    effective_n_ctx,
    planned_n_ctx,
    read_trained_context,
)


def _str(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


Value = tuple[int, bytes]  # (GGUF type, encoded value)


def _u32(n: int) -> Value:
    return 4, struct.pack("<I", n)


def _string(text: str) -> Value:
    return 8, _str(text)


def _strings(items: list[str]) -> Value:
    return 9, struct.pack("<IQ", 8, len(items)) + b"".join(_str(i) for i in items)


def _floats(items: list[float]) -> Value:
    return 9, struct.pack("<IQ", 6, len(items)) + b"".join(struct.pack("<f", i) for i in items)


def write_gguf(path: Path, pairs: list[tuple[str, Value]], version: int = 3) -> Path:
    body = b"".join(_str(k) + struct.pack("<I", t) + v for k, (t, v) in pairs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, 0, len(pairs)) + body)
    return path


def smol(path: Path, trained: int = 8192) -> Path:
    """A header shaped like SmolLM2-135M's: architecture, a tokenizer array, the length."""
    return write_gguf(
        path,
        [
            ("general.architecture", _string("llama")),
            ("general.name", _string("tiny")),
            ("tokenizer.ggml.tokens", _strings(["<s>", "a", "b"] * 50)),
            ("tokenizer.ggml.scores", _floats([0.5] * 40)),
            ("llama.context_length", _u32(trained)),
            ("llama.embedding_length", _u32(576)),
        ],
    )


def test_the_trained_context_is_read_past_the_tokenizer(tmp_path: Path) -> None:
    found = read_trained_context(smol(tmp_path / "m.gguf"))
    assert found.architecture == "llama"
    assert found.n_ctx_train == 8192


def test_another_architectures_length_is_not_taken(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "m.gguf",
        [("general.architecture", _string("qwen2")), ("llama.context_length", _u32(4096))],
    )
    assert read_trained_context(path).n_ctx_train is None


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"not a model", "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + _str("general.architecture"), "ends inside"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
    ],
)
def test_a_broken_header_is_an_embedded_model_error(tmp_path: Path, data: bytes, said: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(EmbeddedModelError, match=said) as caught:
        read_trained_context(path)
    assert "bad.gguf" in str(caught.value)


@settings(max_examples=50, deadline=None)
@given(
    before=st.lists(st.text(min_size=1, max_size=8), max_size=20),
    trained=st.integers(min_value=1, max_value=2**31),
    arch=st.sampled_from(["llama", "qwen2", "phi3"]),
)
def test_the_length_is_found_wherever_it_sits(
    tmp_path_factory: pytest.TempPathFactory, before: list[str], trained: int, arch: str
) -> None:
    path = write_gguf(
        tmp_path_factory.mktemp("g") / "m.gguf",
        [
            ("tokenizer.ggml.tokens", _strings(before)),
            (f"{arch}.context_length", _u32(trained)),
            ("general.architecture", _string(arch)),
        ],
    )
    assert read_trained_context(path).n_ctx_train == trained


def test_the_agent_plans_with_the_smaller_context(tmp_path: Path) -> None:
    assert effective_n_ctx(32768, 8192) == 8192
    assert effective_n_ctx(1024, 8192) == 1024
    assert effective_n_ctx(4096, None) == 4096
    found = read_trained_context(smol(tmp_path / "m.gguf"))
    assert context_warning(8192, found) is None
    warning = context_warning(32768, found)
    assert warning is not None
    assert "32768" in warning
    assert "8192" in warning
    assert "m.gguf" in warning


def _embedded_home(home: Path, model: Path, n_ctx: int) -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nbackend = "embedded"\nmodel_path = "{model}"\n[expect]\nn_ctx = {n_ctx}\n'
    )


def test_planned_n_ctx_follows_the_model(home: Path, tmp_path: Path) -> None:
    model = smol(tmp_path / "m.gguf")
    _embedded_home(home, model, 32768)
    assert planned_n_ctx(load_config(home)) == 8192
    _embedded_home(home, model, 2048)
    assert planned_n_ctx(load_config(home)) == 2048
    # A server backend's context is the server's to report (doctor's /slots).
    (home / "tether.toml").write_text("[expect]\nn_ctx = 32768\n")
    assert planned_n_ctx(load_config(home)) == 32768


def test_config_check_and_init_warn_and_exit_0(home: Path, tmp_path: Path) -> None:
    _embedded_home(home, smol(tmp_path / "m.gguf"), 32768)
    for command in (["config", "check"], ["init"]):
        out = tether(home, *command)
        assert out.returncode == 0, out.stderr
        assert "exceeds the context m.gguf was trained on (8192" in out.stderr
    _embedded_home(home, smol(tmp_path / "m.gguf"), 4096)
    out = tether(home, "config", "check")
    assert out.returncode == 0
    assert "trained on" not in out.stderr
