"""The embedded backend's pure parts (no model needed): cache accounting, tool-call parsing,
message shaping, and the refusal when the extra is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tether.config import parse_config
from tether.daemon.compose import build_llm
from tether.errors import EmbeddedModelError, ExtraMissingError
from tether.llm.embedded import _messages, parse_tool_calls, reused_prefix
from tether.records import ChatMessage, ToolCallRequest


def test_reused_prefix_follows_llama_cpp_python() -> None:
    assert reused_prefix([], [1, 2, 3]) == 0
    assert reused_prefix([1, 2, 9, 9], [1, 2, 3]) == 2
    # The whole prompt cached with more after it: one token is replayed for fresh logits.
    assert reused_prefix([1, 2, 3, 4], [1, 2, 3]) == 2
    assert reused_prefix([1, 2, 3], [1, 2, 3]) == 3
    assert reused_prefix([1, 2], [1, 2, 3, 4]) == 2


def test_tool_calls_are_parsed_out_of_the_text() -> None:
    text = 'Let me look.\n<tool_call>{"name": "recall", "arguments": {"query": "tea"}}</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert calls == (ToolCallRequest(id="call_0", name="recall", args={"query": "tea"}),)
    assert parse_tool_calls("<tool_call>{not json}</tool_call>")[1] == ()
    assert parse_tool_calls("plain") == ("plain", ())


def test_tool_calls_go_into_the_text_for_a_template_without_tools() -> None:
    call = ToolCallRequest(id="call_0", name="recall", args={"query": "tea"})
    msgs = (
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content="green", tool_call_id="call_0"),
    )
    plain = _messages(msgs, tool_template=False)
    assert plain[0] == {
        "role": "assistant",
        "content": '<tool_call>{"name":"recall","arguments":{"query":"tea"}}</tool_call>',
    }
    assert plain[1] == {"role": "tool", "content": "green"}
    assert "tool_calls" in _messages(msgs, tool_template=True)[0]


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is not None, reason="the extra tether[local] is installed"
)
def test_embedded_without_the_extra_says_how_to_install() -> None:
    config = parse_config('[llm]\nbackend = "embedded"\n')
    with pytest.raises(ExtraMissingError) as info:
        build_llm(config)
    assert info.value.exit_code == 2
    assert "--no-binary llama-cpp-python" in str(info.value)
    assert "GGML_NATIVE=OFF" in str(info.value)
    # This tether runs from a checkout (pip install -e): the hint installs the extra there,
    # not a second tether from the package index.
    checkout = Path(__file__).resolve().parents[1]
    assert f"-e '{checkout}[local]'" in str(info.value)


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="the extra tether[local] is missing"
)
def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    config = parse_config(f'[llm]\nbackend = "embedded"\nmodel_path = "{tmp_path / "x.gguf"}"\n')
    with pytest.raises(EmbeddedModelError, match=r"x\.gguf: no such file"):
        build_llm(config)
