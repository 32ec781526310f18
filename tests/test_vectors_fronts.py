"""The MCP ``recall`` tool and ``tether ui``'s recall page get what ``memory recall`` has:
a few rows still without a vector are embedded before the search, and with more missing
the search is lexical and says so (MCP: the result's ``notice``; the ui: a note over the
hits). Real child processes (``tether mcp`` over stdio and HTTP, ``tether ui``), the SDK's
own client, real SQLite and the real MiniLM model (the extra tether[vectors])."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from conftest import clean
from daemon_helpers import tether
from mcp_helpers import NOW, call, create_token, http_server, http_session, stdio_session
from test_vectors_on import APPLE, OTHERS, QUESTION, lexical
from tether.imports.jsonl import import_jsonl
from tether.memory.pages import write_page
from tether.memory.readiness import RECALL_EMBED_ROWS, VAGUE
from tether.stores.sqlite import SqliteStore
from vector_helpers import NEEDS_VECTORS

pytestmark = [
    pytest.mark.vectors,
    pytest.mark.slow,
    NEEDS_VECTORS,
]

#: More rows than a recall embeds before it answers.
MANY = [f"note number {i} about the garden shed" for i in range(RECALL_EMBED_ROWS + 5)]


def _imported(home: Path, texts: list[str]) -> None:
    """``texts`` as one imported session: indexed, never embedded (the library import,
    without the CLI's embedding step: what a failed embedding leaves)."""
    src = home.parent / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps(
                {
                    "session": "s1",
                    "role": "user",
                    "text": t,
                    "time": f"2026-11-01T10:{i // 60:02}:{i % 60:02}Z",
                }
            )
            + "\n"
            for i, t in enumerate(texts)
        )
    )
    import_jsonl(home, src, now=NOW, store=lambda: closing(SqliteStore(home / "tether.db")))


def world_page(home: Path) -> None:
    """The world-visible page ``tv`` (the Apple TV+ note): what a remote MCP client may find."""
    store = SqliteStore(home / "tether.db")
    write_page(
        store,
        "tv",
        clean(APPLE),
        title=None,
        tags=(),
        visibility="world",
        untrusted=False,
        who="owner",
        session=None,
        time=NOW,
    )
    store.close()


async def _recall(session: Any, query: str) -> dict[str, Any]:
    error, text = await call(session, "recall", query=query, k=3)
    assert not error, text
    result: dict[str, Any] = json.loads(text)
    return result


@pytest.mark.anyio
async def test_mcp_recall_embeds_a_few_missing_rows_before_it_answers(home: Path) -> None:
    _imported(home, [*OTHERS, APPLE])
    assert len(lexical(home)) == 1  # indexed, not embedded
    async with stdio_session(home) as s:
        result = await _recall(s, QUESTION)
        assert result["hits"][0]["text"] == APPLE  # no word in common: found by meaning
        assert "notice" not in result
        again = await _recall(s, QUESTION)  # nothing left to embed: the same answer
        assert again == result
    assert lexical(home) == []


@pytest.mark.anyio
async def test_mcp_recall_with_many_rows_missing_answers_and_says_so(home: Path) -> None:
    _imported(home, [*MANY, APPLE])
    total = len(MANY) + 1 + 1  # the turns, and the session's digest (a summary unit)
    async with stdio_session(home) as s:
        result = await _recall(s, "Apple TV+ Severance")
        assert result["hits"][0]["text"] == APPLE  # answered, lexically
        notice = result["notice"]
        assert notice.startswith(f"recall is lexical: {total} rows of {total} have no vector")
        assert "tether memory reindex --vectors" in notice
    assert len(lexical(home)) == 1  # nothing was embedded behind its back
    done = json.loads(tether(home, "memory", "reindex", "--vectors", "--json", timeout=300).stdout)
    assert done["with_vectors"] == done["rows"]
    async with stdio_session(home) as s:
        assert "notice" not in await _recall(s, "Apple TV+ Severance")


@pytest.mark.anyio
async def test_a_remote_mcp_client_is_told_recall_is_lexical_without_counts(
    home: Path,
) -> None:
    _imported(home, MANY)
    world_page(home)
    token, _ = create_token(home)
    with http_server(home) as url:
        async with http_session(url, token) as s:
            result = await _recall(s, "Apple TV+ Severance")
    assert [h["id"] for h in result["hits"]] == ["page:tv"]
    assert result["notice"] == VAGUE  # the private rows' count is not the client's business
    assert str(len(MANY)) not in json.dumps(result)


def _page(home: Path, query: str) -> str:
    from ui_helpers import logged_in, serve_ui

    with serve_ui(home) as served:
        client = logged_in(served, served.login)
        try:
            page = client.get("/recall", params={"q": query})
            assert page.status_code == 200, page.text
            return page.text
        finally:
            client.close()


def test_the_ui_embeds_a_few_missing_rows_before_it_answers(home: Path) -> None:
    _imported(home, [*OTHERS, APPLE])
    page = _page(home, QUESTION)
    assert "(words and meaning)" in page
    assert APPLE in page.split('<tr class="hit">')[1]
    assert "recall is lexical" not in page
    assert lexical(home) == []


def test_the_ui_says_why_recall_is_lexical_with_many_rows_missing(home: Path) -> None:
    _imported(home, [*MANY, APPLE])
    page = _page(home, "Apple TV+ Severance")
    total = len(MANY) + 1 + 1  # the turns, and the session's digest (a summary unit)
    assert "(words only)" in page
    assert (
        f'<p class="note lexical">recall is lexical: {total} rows of {total} have no vector' in page
    )
    assert "Severance" in page.split('<tr class="hit">')[1]  # answered, lexically
    assert len(lexical(home)) == 1
