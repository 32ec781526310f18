"""An MCP ``recall`` that embeds rows before it searches does so off the server's event
loop: while one is held at its embedding (the pause point ``recall-before-embed``),
another client's requests over HTTP, and a ping and a tool call on the same stdio
session, are answered; released, the recall answers as before. Real child processes
(``tether mcp``), the SDK's own client, real SQLite and the MiniLM model (tether[vectors])."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession

from mcp_helpers import call, create_token, http_server, http_session, stdio_session
from test_vectors_fronts import _imported, world_page
from test_vectors_on import OTHERS
from tether.faults import PAUSE_DIR_ENV, PAUSE_ENV, PAUSE_S_ENV
from tether.memory.readiness import PAUSE_RECALL_EMBED
from tether.testing.pause import release, wait_reached
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    pytest.mark.slow,
    NEEDS_VECTORS,
]

#: Guards against a hang, not timings asserted: a server whose loop the recall held would
#: answer the second request only after the pause (``PAUSE_S``) ran out.
ANSWER_S = 30
PAUSE_S = "120"


@pytest.fixture
def pauses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "pauses"
    folder.mkdir()
    monkeypatch.setenv(PAUSE_ENV, PAUSE_RECALL_EMBED)
    monkeypatch.setenv(PAUSE_DIR_ENV, str(folder))
    monkeypatch.setenv(PAUSE_S_ENV, PAUSE_S)
    return folder


def _home(home: Path) -> None:
    """A few imported rows without vectors (the recall embeds them first) and a world
    page the remote lane may find."""
    _imported(home, OTHERS)
    world_page(home)


async def _held_recall(first: ClientSession, pauses: Path, meanwhile: Any) -> dict[str, Any]:
    """A recall on ``first`` held at its embedding while ``meanwhile()`` runs (each of its
    requests must be answered), then released; the recall's result."""
    done: dict[str, Any] = {}

    async def recall() -> None:
        error, text = await call(first, "recall", query="Apple TV+ Severance", k=3)
        assert not error, text
        done["result"] = json.loads(text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(recall)
        reached = await anyio.to_thread.run_sync(wait_reached, pauses, PAUSE_RECALL_EMBED, 60.0)
        assert reached, "the recall never came to its embedding"
        try:
            with anyio.fail_after(ANSWER_S):
                await meanwhile()
            assert done == {}  # answered while the recall was still held
        finally:
            release(pauses, PAUSE_RECALL_EMBED)
    result: dict[str, Any] = done["result"]
    return result


@pytest.mark.anyio
async def test_http_requests_are_answered_while_a_recall_embeds(home: Path, pauses: Path) -> None:
    _home(home)
    token, _ = create_token(home)
    with http_server(home) as url:
        async with http_session(url, token) as first:
            seen: dict[str, Any] = {}

            async def meanwhile() -> None:
                async with http_session(url, token) as second:  # another client connects
                    seen["tools"] = {t.name for t in (await second.list_tools()).tools}
                    seen["pages"] = await call(second, "pages", prefix="")
                    await second.send_ping()

            result = await _held_recall(first, pauses, meanwhile)
    assert seen["tools"] == {"recall", "read", "remember", "pages"}
    error, text = seen["pages"]
    assert not error
    assert [p["slug"] for p in json.loads(text)["pages"]] == ["tv"]
    assert [h["id"] for h in result["hits"]] == ["page:tv"]
    assert "notice" not in result  # the rows were embedded: the search fused vectors


@pytest.mark.anyio
async def test_a_stdio_session_is_answered_while_its_recall_embeds(
    home: Path, pauses: Path
) -> None:
    _home(home)
    async with stdio_session(home) as s:
        seen: dict[str, Any] = {}

        async def meanwhile() -> None:
            await s.send_ping()
            seen["pages"] = await call(s, "pages", prefix="")

        result = await _held_recall(s, pauses, meanwhile)
    error, text = seen["pages"]
    assert not error
    assert [p["slug"] for p in json.loads(text)["pages"]] == ["tv"]
    assert result["hits"][0]["id"] == "page:tv"
    assert "notice" not in result
