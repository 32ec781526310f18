"""Inference backends behind one protocol: ``Llm.complete(CompletionRequest) -> Completion``."""

from tether.llm.llama_server import LlamaServerClient
from tether.llm.types import Completion, CompletionRequest, Llm

__all__ = ["Completion", "CompletionRequest", "LlamaServerClient", "Llm"]
