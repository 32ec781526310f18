"""``tether compile-context``: the owner's pages as a context file for another harness.

``--json`` prints ``{"target", "path", "status", "budget", "tokens", "pages",
"left_out": [{"slug", "reason", "rule", "fingerprint"}]}``: a contract, keys are added,
never renamed. ``status`` is ``written``, ``unchanged``, ``current`` or ``stale``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tether.cli.context import Context, counted, echo_json, pass_ctx
from tether.core.views.compiled import DEFAULT_BUDGET, DEFAULT_PATHS, TARGETS, Target
from tether.views.compile import ViewReport, compile_view


def _json(report: ViewReport) -> dict[str, Any]:
    return {
        "target": report.target,
        "path": str(report.path),
        "status": report.status,
        "budget": report.budget,
        "tokens": report.tokens,
        "pages": list(report.pages),
        "left_out": [
            {"slug": x.slug, "reason": x.reason, "rule": x.rule, "fingerprint": x.fingerprint}
            for x in report.left_out
        ],
    }


def _echo_left_out(report: ViewReport) -> None:
    over: list[str] = []
    for x in report.left_out:
        if x.reason == "sensitive":
            click.echo(
                f"left out {x.slug}: it holds {x.rule} (fingerprint {x.fingerprint}; if that is "
                f"no leak, add the fingerprint to {report.allow_file})",
                err=True,
            )
        else:
            over.append(x.slug)
    if over:
        shown = ", ".join(over[:10]) + (f" and {len(over) - 10} more" if len(over) > 10 else "")
        click.echo(
            f"left out {counted(len(over), 'page')} past the budget of {report.budget} tokens: "
            f"{shown}",
            err=True,
        )


@click.command("compile-context")
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    required=True,
    help="claude-code: .claude/tether-context.md (@import it from CLAUDE.md); codex: a "
    "managed block in AGENTS.md; openclaw: .tether/compiled-context.md.",
)
@click.option(
    "--budget",
    type=click.IntRange(1),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Tokens for the whole file (for codex, the whole block).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the file is stale.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The file to write (default: the target's path under the current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@pass_ctx
def compile_context_cmd(
    ctx: Context, *, target: Target, budget: int, check: bool, out: Path | None, as_json: bool
) -> None:
    """Compile the owner's world-visible pages into a context file another harness loads.

    Pinned pages (tag compile-context) come first, then people/, concepts/, companies/
    and originals/ pages and those of the last 30 days, newest first. Private and
    untrusted pages never leave the home; a page holding a secret, personal data or a
    blocklisted term is left out and named. The same pages give the same bytes."""
    path = out if out is not None else Path(DEFAULT_PATHS[target])
    with ctx.store() as store:
        report = compile_view(ctx.home, store, target=target, path=path, budget=budget, check=check)
    if as_json:
        echo_json(_json(report))
    else:
        _echo_left_out(report)
        if report.left_out and not report.pages and report.tokens > budget:
            # The seed's rule: such a view still says what it is; but say it was no mistake.
            click.echo(
                f"tether: warning: a budget of {budget} tokens is less than the file's own "
                f"header and note ({report.tokens} tokens): it holds no page; "
                f"give a larger --budget for pages",
                err=True,
            )
        summary = f"{counted(len(report.pages), 'page')}, {report.tokens} of {budget} tokens"
        messages = {
            "written": f"wrote {path}: {summary}",
            "unchanged": f"{path} is up to date: {summary}",
            "current": f"{path} is current: {summary}",
            "stale": f"{path} is stale: run `tether compile-context --target {target}` to write it",
        }
        click.echo(messages[report.status], err=report.status == "stale")
    if report.status == "stale":
        click.get_current_context().exit(1)


COMMANDS = [compile_context_cmd]
MEMORY_COMMANDS: list[click.Command] = []
