"""``tether doctor``: is the configured inference backend usable, and with what context?

Reports the backend, the model, and the context of each slot tether uses; for a server
backend whether it answers (``/health``, and ``/slots`` where the server has it); for the
embedded backend whether the extra is installed, the model file loads, and a one-token
completion runs. It also looks for damage (``doctor.integrity``): a lost WAL, a store that
fails ``quick_check``, a missing or empty full-text index, malformed or edited log lines.
Exit 0 when the backend is usable and nothing is damaged, 1 otherwise.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from tether.cli.context import Context, echo_json, pass_ctx
from tether.scan.urls import shown_url

if TYPE_CHECKING:
    from tether.doctor.probe import Report


def _json(report: Report) -> dict[str, Any]:
    out = asdict(report)
    out["ok"] = report.ok
    return out


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def doctor_cmd(ctx: Context, as_json: bool) -> None:
    """Check the inference backend: model, per-slot context, whether it answers.
    Exits 1 when the backend is unusable."""
    from tether.doctor.checks import examine

    config = ctx.config()
    report = examine(ctx.app)
    if as_json:
        echo_json(_json(report))
    else:
        where = "" if report.backend == "embedded" else f" at {shown_url(config.llm.url)}"
        click.echo(f"backend: {report.backend}{where}")
        trained = "" if report.n_ctx_train is None else f" (trained on {report.n_ctx_train})"
        click.echo(f"model:   {report.model or '(default)'}{trained}")
        for role, slot in report.slots.items():
            n_ctx = report.n_ctx.get(role)
            shown = "not reported" if n_ctx is None else str(n_ctx)
            click.echo(f"slot {role}: {slot} (n_ctx {shown}; [expect] n_ctx {config.expect.n_ctx})")
        for c in report.checks:
            click.echo(f"  {'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        for p in report.problems:
            line = f":{p.line}" if p.line is not None else ""
            click.echo(f"  PROBLEM {p.name}: {p.where}{line}: {p.detail} (repair: {p.repair})")
        for w in report.warnings:
            click.echo(f"  WARN {w}")
        click.echo("usable" if report.ok else "NOT usable")
    if not report.ok:
        ctx_click = click.get_current_context()
        ctx_click.exit(1)


COMMANDS = [doctor_cmd]
