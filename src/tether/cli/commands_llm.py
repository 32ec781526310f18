"""``tether fake-llm``: the protocol fake as a standalone server."""

from __future__ import annotations

import click


@click.command("fake-llm")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--n-ctx", default=32768, show_default=True, type=click.IntRange(64), help="Tokens per slot."
)
@click.option("--parallel", default=2, show_default=True, type=click.IntRange(1, 64))
def fake_llm(host: str, port: int, n_ctx: int, parallel: int) -> None:
    """Run a fake llama-server (slots, cache accounting, context-full errors) for trying
    tether with no model. Replies are deterministic echoes unless scripted."""
    from tether.errors import BadInputError
    from tether.testing.fake_llama import serve_forever  # only this command needs it

    try:
        serve_forever(host, port, n_ctx, parallel)
    except OSError as exc:  # a port in use, a host that is no address of this machine
        raise BadInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


COMMANDS = [fake_llm]
