"""``tether page write|show|list|rm``: the owner's memory pages.

``page show --json`` and ``page list --json`` print pages as ``{"slug", "title", "body",
"tags", "visibility", "untrusted", "updated_at"}`` (``list`` leaves ``body`` out): a
contract, keys are added, never renamed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tether.cli.context import Context, echo_json, pass_ctx, redact_option, utc_stamp
from tether.errors import BadInputError, NotFoundError
from tether.files import decode_utf8, read_bounded, read_user_text
from tether.ids import page_slug
from tether.memory.pages import MAX_PAGE_CHARS, Visibility, remove_page, render, write_page
from tether.records import Page


def page_json(page: Page, *, body: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"slug": page.slug, "title": page.title}
    if body:
        out["body"] = page.body
    out |= {
        "tags": list(page.tags),
        "visibility": page.visibility,
        "untrusted": page.untrusted,
        "updated_at": utc_stamp(page.updated_at),
    }
    return out


#: The most a page's body is read as (UTF-8 takes up to 4 bytes a character): a bigger
#: file, or a device that never ends, is refused while reading.
BODY_BYTES = 4 * MAX_PAGE_CHARS


def _body(file: Path | None) -> str:
    """The page's body: from FILE ('-': stdin), or stdin when it is not a terminal."""
    if file is None or str(file) == "-":
        if file is None and sys.stdin.isatty():
            raise BadInputError("give the page's body with --file PATH, or on stdin")
        return decode_utf8(read_bounded(sys.stdin.buffer, BODY_BYTES, "<stdin>"), "<stdin>")
    text = read_user_text(file, limit=BODY_BYTES)
    if text is None:
        raise NotFoundError(f"no file {file}")
    return text


@click.group("page")
def page_group() -> None:
    """Memory pages: longer notes under a slug (people/ada), found by recall and read by
    the agent with page_read tether://SLUG."""


@page_group.command("write")
@click.argument("slug")
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the body from PATH ('-': stdin; default: stdin).",
)
@click.option("--title", default=None, help="Default: the body's first '# ' heading, else SLUG.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option(
    "--visibility",
    type=click.Choice(["private", "world"]),
    default="private",
    show_default=True,
    help="Who may see it beyond this home.",
)
@redact_option
@pass_ctx
def write_cmd(
    ctx: Context,
    *,
    slug: str,
    file: Path | None,
    title: str | None,
    tags: tuple[str, ...],
    visibility: Visibility,
    redact: bool,
) -> None:
    """Create or replace the page SLUG (journalled, with the page it replaced).

    A body, title or tag holding a secret is refused unless --redact is given."""
    slug = page_slug(slug)
    source = "stdin" if file is None or str(file) == "-" else str(file)
    body = ctx.screen(_body(file), what=f"page {slug} ({source})", redact=redact)
    heading = None if title is None else ctx.screen(title, what="--title", redact=redact)
    # A tag is stored, indexed, shown and recalled like the body: screened like it.
    labels = [ctx.screen(t, what=f"--tag {n}", redact=redact) for n, t in enumerate(tags, 1)]
    with ctx.store() as store:
        page, before = write_page(
            store,
            slug,
            body,
            title=heading,
            tags=labels,
            visibility=visibility,
            untrusted=False,
            who="owner",
            session=None,
            time=ctx.now(),
        )
    click.echo(f"{'replaced' if before else 'wrote'} page {page.slug}: {page.title}")


@page_group.command("show")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the page as one JSON object.")
@pass_ctx
def show_cmd(ctx: Context, slug: str, as_json: bool) -> None:
    """The page SLUG: title, tags, visibility, trust, last update, body."""
    slug = page_slug(slug)
    with ctx.store() as store:
        page = store.get_page(slug)
    if page is None:
        raise NotFoundError(f"no page {slug!r} (see `tether page list`)")
    if as_json:
        echo_json(page_json(page))
        return
    trust = "untrusted" if page.untrusted else "trusted"
    tags = f" tags: {', '.join(page.tags)};" if page.tags else ""
    click.echo(f"[{page.slug};{tags} {page.visibility}; {trust}; {utc_stamp(page.updated_at)}]")
    click.echo(render(page).rstrip("\n"))


@page_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list (no bodies).")
@pass_ctx
def list_cmd(ctx: Context, as_json: bool) -> None:
    """Every page, by slug."""
    with ctx.store() as store:
        pages = store.pages()
    if as_json:
        echo_json([page_json(p, body=False) for p in pages])
        return
    if not pages:
        click.echo("no pages")
        return
    for p in pages:
        mark = " (untrusted)" if p.untrusted else ""
        click.echo(f"{p.slug:<32} {utc_stamp(p.updated_at)}  {p.title}{mark}")


@page_group.command("rm")
@click.argument("slug")
@pass_ctx
def rm_cmd(ctx: Context, slug: str) -> None:
    """Remove the page SLUG (journalled with its text)."""
    with ctx.store() as store:
        gone = remove_page(store, slug, who="owner", session=None, time=ctx.now())
    click.echo(f"removed page {gone.slug}: {gone.title}")


COMMANDS = [page_group]
