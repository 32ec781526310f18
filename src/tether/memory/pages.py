"""Memory pages: longer things the owner wants the agent to know (a person, a project, a
trip), each under a slug the agent reads with ``page_read tether://<slug>`` and recall
finds. Every write and removal is journalled with the text before and after. A page's
body, title and tags are ``Screened`` (``tether.scan.screen``): no secret is stored in clear."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from tether.errors import BadInputError, NotFoundError
from tether.ids import page_slug
from tether.ports import PageWriter
from tether.records import JournalEntry, Page
from tether.scan.screen import Screened

Visibility = Literal["private", "world"]


def title_of(body: str, slug: str) -> str:
    """A page's title when none is given: its first Markdown heading, else the slug."""
    for line in body.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()
    return slug


def render(page: Page) -> str:
    """A page as text: its title as a heading, then its body (which may already open
    with that heading: then only the body)."""
    if page.body.lstrip().startswith(f"# {page.title}"):
        return page.body
    return f"# {page.title}\n\n{page.body}"


#: The longest page body and title, in characters (a page is read whole by ``page_read``
#: and shown whole by ``page show``; 256 Ki characters is a long book chapter).
MAX_PAGE_CHARS = 262_144
MAX_TITLE_CHARS = 200


def write_page(
    store: PageWriter,
    slug: str,
    screened_body: Screened,
    *,
    title: Screened | None,
    tags: Sequence[Screened],
    visibility: Visibility,
    untrusted: bool,
    who: str,
    session: str | None,
    time: datetime,
) -> tuple[Page, Page | None]:
    """Create or replace the page ``slug``; (the page, the page it replaced)."""
    slug = page_slug(slug)
    body = screened_body.text
    if not body.strip():
        raise BadInputError(f"page {slug!r} needs a body")
    if len(body) > MAX_PAGE_CHARS:
        raise BadInputError(
            f"page {slug!r}: a page is at most {MAX_PAGE_CHARS} characters "
            f"(this one has {len(body)}); split it into pages"
        )
    if title is not None and len(title.text) > MAX_TITLE_CHARS:
        raise BadInputError(f"page {slug!r}: a title is at most {MAX_TITLE_CHARS} characters")
    clean_tags = tuple(dict.fromkeys(t.text.strip() for t in tags if t.text.strip()))
    page = Page(
        slug=slug,
        title=(title.text if title else "").strip() or title_of(body, slug),
        body=body,
        tags=clean_tags,
        visibility=visibility,
        untrusted=untrusted,
        updated_at=time,
    )
    before = store.get_page(slug)
    store.put_page(page)
    store.journal_append(
        JournalEntry(
            time=time,
            who=who,
            session=session,
            action="page_write",
            target=f"page:{slug}",
            before=None if before is None else render(before),
            after=render(page),
        )
    )
    return page, before


def remove_page(
    store: PageWriter, slug: str, *, who: str, session: str | None, time: datetime
) -> Page:
    """Remove the page ``slug``; NotFoundError when there is none."""
    slug = page_slug(slug)
    gone = store.delete_page(slug)
    if gone is None:
        raise NotFoundError(f"no page {slug!r} (see `tether page list`)")
    store.journal_append(
        JournalEntry(
            time=time,
            who=who,
            session=session,
            action="page_remove",
            target=f"page:{slug}",
            before=render(gone),
            after=None,
        )
    )
    return gone
