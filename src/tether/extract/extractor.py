"""The I/O half of the fact extractor: ask the model for a candidate page over the
``Llm`` port, on the slot the caller names (the background slot), with the page's JSON
schema as constrained output (llama-server ``response_format``; the embedded backend's
grammar), then validate it with ``core.learning.extraction``.

The extractor holds no gate and no budget of its own: a caller that must queue behind
other background work or weigh the call against ``[budget]`` passes an ``Llm`` that does
(everything here goes through ``Llm.complete``). Quotes are checked against stored turns:
those the request carries and those ``reader`` returns for the turn ranges the memories
cite (the sweep reads them from the store; the harvest passes its segment's turns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from tether.core.learning import extraction as rules
from tether.core.learning import fact_list
from tether.core.learning.extraction import ExtractionError
from tether.ports import Llm
from tether.records import (
    ChatMessage,
    Completion,
    CompletionRequest,
    Extraction,
    ExtractionRequest,
    ExtractionUsage,
    SourceTurn,
)

#: Reads the stored turns ``first..last`` (inclusive) of one session, redacted; a turn
#: that does not exist is simply absent.
TurnReader = Callable[[str, int, int], Sequence[SourceTurn]]

__all__ = ["ExtractionError", "Extractor", "TurnReader", "usage_of"]

#: What the short form (``core.learning.fact_list``) asks a small model: one short job.
LIST_INSTRUCTIONS = (
    "Copy the facts the user states about themselves, one short sentence each, "
    "with the turn number where the user said it. Skip questions and greetings."
)
#: A short-form reply's bound: six short facts fit; a model that loops is cut here and
#: its complete items are kept (``core.learning.extraction.salvage``).
LIST_REPLY_TOKENS = 320


def usage_of(completion: Completion) -> ExtractionUsage:
    return ExtractionUsage(completion.cache_n, completion.prompt_n, completion.predicted_n)


class Extractor:
    """``slot``: the server slot every call goes to; ``max_tokens``: the reply's bound;
    ``temperature``: 0 by default, so a page is as repeatable as the backend allows;
    ``form``: ``page`` (the full candidate page) or ``list`` (the short form for small
    models: ``request.turns`` are shown, the instructions are ``LIST_INSTRUCTIONS``)."""

    def __init__(
        self,
        llm: Llm,
        *,
        slot: int,
        max_tokens: int = 2048,
        temperature: float | None = 0.0,
        form: rules.Form = "page",
        on_malformed: Callable[[], None] | None = None,
    ) -> None:
        self.llm = llm
        #: Told of every reply that is not a page (``MeteredLlm.malformed``: the call log).
        self.on_malformed = on_malformed
        self.slot = slot
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.form: rules.Form = form

    def completion_request(self, request: ExtractionRequest) -> CompletionRequest:
        """The exact request ``extract`` sends (callers bound and price it first)."""
        if self.form == "list":
            owner_turns = [t.turn for t in request.turns if t.role == "owner"]
            return self.json_request(
                (
                    ChatMessage(role="system", content=LIST_INSTRUCTIONS),
                    ChatMessage(role="user", content=fact_list.render_list_source(request.turns)),
                ),
                fact_list.list_schema(owner_turns, min(request.max_memories, fact_list.MAX_FACTS)),
                max_tokens=min(self.max_tokens, LIST_REPLY_TOKENS),
            )
        schema = rules.page_schema(
            sessions=request.sessions,
            folder_sessions=request.folder_sessions,
            max_memories=request.max_memories,
        )
        messages = (
            ChatMessage(role="system", content=request.instructions),
            ChatMessage(role="user", content=request.source),
            *request.prelude,
        )
        return self.json_request(messages, schema)

    def json_request(
        self, messages: Sequence[ChatMessage], schema: dict[str, Any], max_tokens: int | None = None
    ) -> CompletionRequest:
        return CompletionRequest(
            messages=tuple(messages),
            slot=self.slot,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            json_schema=schema,
            temperature=self.temperature,
        )

    async def complete_json(self, request: CompletionRequest) -> tuple[Any, Completion]:
        """One constrained call: the decoded JSON reply and the completion (its usage).
        Raises ExtractionError(malformed_output) when the reply is not JSON."""
        completion = await self.llm.complete(request)
        try:
            value = msgspec.json.decode(completion.content.strip() or "null")
        except msgspec.DecodeError:
            raise ExtractionError("malformed_output", completion.content) from None
        return value, completion

    async def extract(
        self, request: ExtractionRequest, reader: TurnReader | None = None
    ) -> Extraction:
        """One model call and the validated page. Raises ExtractionError when the reply
        is not a page, and the backend's LlmError when the call fails."""
        completion = await self.llm.complete(self.completion_request(request))
        return self.read_page(completion.content, request, reader, usage=usage_of(completion))

    def read_page(
        self,
        content: str,
        request: ExtractionRequest,
        reader: TurnReader | None = None,
        *,
        usage: ExtractionUsage | None = None,
    ) -> Extraction:
        """Validate a reply already received (``extract`` after its call; the sweep when
        it re-reads a staged reply): parse, read the cited turns, earn authorities."""
        try:
            if self.form == "list":
                draft = fact_list.parse_list(content, request)
            else:
                draft = rules.parse_page(content, request)
        except ExtractionError:
            if self.on_malformed is not None:
                self.on_malformed()
            raise
        turns: list[SourceTurn] = []
        if reader is not None:
            for session, first, last in draft.ranges():
                turns.extend(reader(session, first, last))
        return rules.finish(draft, request, turns, usage=usage, raw=content)
