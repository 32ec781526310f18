"""Inference backends behind one protocol (``tether.ports.Llm``):
``complete(CompletionRequest) -> Completion``, both records in ``tether.records``."""

from tether.llm.llama_server import LlamaServerClient

__all__ = ["LlamaServerClient"]
