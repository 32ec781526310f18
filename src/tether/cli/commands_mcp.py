"""``tether mcp``: serve the memory to an MCP client; ``tether mcp token ...``: the bearer
tokens of the HTTP transport."""

from __future__ import annotations

import contextlib
import ipaddress

import anyio
import click

from tether.cli.context import Context, counted, echo_json, pass_ctx, utc_stamp
from tether.errors import BadInputError


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.group("mcp", invoke_without_command=True)
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP (the remote lane).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (--http).")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to bind (--http; 0: a free one, printed on stderr).",
)
@click.option(
    "--untrusted",
    is_flag=True,
    help="stdio: store notes it writes as untrusted (as HTTP always does).",
)
@click.pass_context
def mcp_group(click_ctx: click.Context, http: bool, host: str, port: int, untrusted: bool) -> None:
    """Serve the memory to an MCP client: stdio (the trusted local lane) or, with --http,
    streamable HTTP for remote clients with a bearer token (world-visibility pages and
    facts only).

    Tools: recall(query, k, level), read(link), remember(text), pages(prefix); pages are
    resources tether://SLUG. Over HTTP every request needs `Authorization: Bearer TOKEN`
    (`tether mcp token create`); the server binds 127.0.0.1 unless --host says otherwise."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    if not http and (host != "127.0.0.1" or port != 8765):
        raise BadInputError("--host and --port are for --http (stdio has no address)")
    if http and untrusted:
        raise BadInputError("--untrusted is for stdio: what HTTP clients write is always untrusted")
    _serve(ctx, http=http, host=host, port=port, trusted=not untrusted)


def _serve(ctx: Context, *, http: bool, host: str, port: int, trusted: bool) -> None:
    from tether.mcp.server import serve_http, serve_stdio
    from tether.mcp.service import Memory
    from tether.mcp.tokens import TokenCheck, list_tokens

    config = ctx.config()
    home = ctx.home
    if http:
        list_tokens(home)  # a token file that cannot be read stops the start, exit 2
        if not _loopback(host):
            click.echo(
                f"tether mcp: warning: binding {host}, not loopback: anyone who can reach it"
                " and holds a token reads the world-visibility memory; put TLS in front",
                err=True,
            )
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(ctx.store())
        sweep = stack.enter_context(ctx.sweep_reader())
        vectors = ctx.vectors()  # the command's application closes them
        memory = Memory(
            home,
            store,
            sweep,
            result_tokens=config.mcp.result_tokens,
            now=ctx.now,
            vectors=vectors,
            slot=config.slots.main,
        )
        with contextlib.suppress(KeyboardInterrupt):
            if http:
                anyio.run(lambda: serve_http(memory, TokenCheck(home), host=host, port=port))
            else:
                anyio.run(lambda: serve_stdio(memory, trusted=trusted))


@mcp_group.group("token")
def token_group() -> None:
    """Bearer tokens for `tether mcp --http`, stored hashed in <home>/mcp/tokens."""


@token_group.command("create")
@click.option("--name", default="", help="What the token is for (shown by `list`).")
@click.option("--json", "as_json", is_flag=True, help='Print {"token": ..., "id": ...}.')
@pass_ctx
def token_create(ctx: Context, name: str, as_json: bool) -> None:
    """Create a token and print it: the only time it is shown (only its hash is kept)."""
    from tether.mcp.tokens import create_token

    token, record = create_token(ctx.home, name, time=ctx.now())
    if as_json:
        echo_json({"token": token, "id": record.id})
        return
    click.echo(token)
    click.echo(
        f"token {record.id} created; it is shown only now: give it to the client as"
        " `Authorization: Bearer <token>`",
        err=True,
    )


@token_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@pass_ctx
def token_list(ctx: Context, as_json: bool) -> None:
    """Live tokens: id, name, when created (never the token)."""
    from tether.mcp.tokens import list_tokens

    records = list_tokens(ctx.home)
    if as_json:
        echo_json([{"id": r.id, "name": r.name, "created": utc_stamp(r.created)} for r in records])
        return
    if not records:
        click.echo("no MCP tokens (create one with `tether mcp token create`)")
        return
    for r in records:
        click.echo(f"{r.id}  {utc_stamp(r.created)}  {r.name}")
    click.echo(counted(len(records), "token"), err=True)


@token_group.command("revoke")
@click.argument("token_id", metavar="ID")
@pass_ctx
def token_revoke(ctx: Context, token_id: str) -> None:
    """Revoke the token ID: a running server refuses it from its next request on."""
    from tether.mcp.tokens import revoke_token

    gone = revoke_token(ctx.home, token_id)
    click.echo(f"revoked token {gone.id}{f' ({gone.name})' if gone.name else ''}")


COMMANDS = [mcp_group]
MEMORY_COMMANDS: list[click.Command] = []
