"""The fact extractor's I/O half against the fake llama-server over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tether.core.learning.extraction import ExtractionError
from tether.extract.extractor import Extractor
from tether.llm.llama_server import LlamaServerClient
from tether.records import ExtractionRequest, SourceTurn
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = pytest.mark.anyio

STORED = {
    ("s1", 2): SourceTurn(
        session="s1", turn=2, role="owner", text="We moved the book club to Tuesdays."
    ),
    ("s1", 3): SourceTurn(session="s1", turn=3, role="assistant", text="Tuesdays it is."),
}


def reader(session: str, first: int, last: int) -> Sequence[SourceTurn]:
    reads.append((session, first, last))
    return [t for (s, n), t in STORED.items() if s == session and first <= n <= last]


reads: list[tuple[str, int, int]] = []


async def test_one_constrained_call_on_the_given_slot_and_earned_authority(
    fake: FakeLlama,
) -> None:
    reads.clear()
    fake.script(
        Reply(
            content=json.dumps(
                {
                    "memories": [
                        {
                            "text": "Book club meets on Tuesdays",
                            "subject": "owner",
                            "entity": "book-club",
                            "sessions": ["s1"],
                            "first_turn": 2,
                            "last_turn": 3,
                            "quote": "moved the book club to Tuesdays",
                        },
                        {
                            "text": "Unsourced",
                            "subject": "owner",
                            "entity": "x",
                            "sessions": ["nope"],
                        },
                    ],
                    "folders": [{"session": "s1", "folder": "Hobbies"}],
                }
            )
        )
    )
    request = ExtractionRequest(
        instructions="Extract facts.",
        source="[session s1 turn 2] owner: ...",
        sessions=("s1",),
        folder_sessions=("s1",),
    )
    async with LlamaServerClient(fake.url, timeout_s=5) as llm:
        out = await Extractor(llm, slot=1, max_tokens=300).extract(request, reader)
    (sent,) = fake.requests
    assert sent.slot == 1
    assert sent.json_schema is not None
    assert "folders" in sent.json_schema["properties"]
    assert sent.body["max_tokens"] == 300
    assert [m["role"] for m in sent.messages] == ["system", "user"]
    assert reads == [("s1", 2, 3)]
    (fact,) = out.facts
    assert fact.authority == "direct_user_statement"
    assert fact.provenance.quote_turn == 2
    assert out.dropped_provenance == 1
    assert [(f.session, f.folder) for f in out.folders] == [("s1", "Hobbies")]
    assert out.usage.predicted_n > 0
    assert out.raw.startswith('{"memories"')


async def test_a_reply_that_is_not_a_page_raises_malformed_output(fake: FakeLlama) -> None:
    fake.script(Reply(content="Sure! Here are the facts: ..."))
    request = ExtractionRequest(instructions="x", source="y", sessions=("s1",))
    async with LlamaServerClient(fake.url, timeout_s=5) as llm:
        with pytest.raises(ExtractionError) as info:
            await Extractor(llm, slot=1).extract(request)
    assert info.value.reason == "malformed_output"
