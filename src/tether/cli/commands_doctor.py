"""``tether doctor``: is the configured inference backend usable, and with what context?

Reports the backend, the model, and the context of each slot tether uses; for a server
backend whether it answers (``/health``, and ``/slots`` where the server has it); for the
embedded backend whether the extra is installed, the model file loads, and a one-token
completion runs. It also looks for damage (``doctor_integrity``): a lost WAL, a store that
fails ``quick_check``, a missing or empty full-text index, malformed or edited log lines.
Exit 0 when the backend is usable and nothing is damaged, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from typing import Any

import click
import httpx

from tether.cli.context import Context, echo_json, pass_ctx
from tether.cli.doctor_integrity import (
    Problem,
    session_problems,
    store_problems,
    torn_tail_warnings,
    wal_problems,
    wal_warnings,
)
from tether.config import Config
from tether.errors import LlmError, TetherError
from tether.llm.llama_server import LlamaServerClient
from tether.records import ChatMessage, CompletionRequest
from tether.scan.urls import shown_url

#: Seconds a doctor's probe of a server waits at most (whatever [llm] timeout_s says).
PROBE_TIMEOUT_S = 5.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    backend: str
    model: str
    slots: dict[str, int]
    expect_n_ctx: int
    #: The context the embedded model was trained on, from its GGUF header (None: a
    #: server backend, or the file does not say).
    n_ctx_train: int | None = None
    #: Slot role -> n_ctx as the backend reports it (None: not reported).
    n_ctx: dict[str, int | None] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    #: The store (``stores.StoreInfo``): backend, where, server version, migration level.
    store: dict[str, Any] = field(default_factory=dict)
    #: What does not make the backend unusable but the owner should know (a setting that
    #: weakens a guarantee, a budget hit today); the exit code does not change.
    warnings: list[str] = field(default_factory=list)
    #: Damage found in the store or the session logs (``doctor_integrity.Problem``), each
    #: named after its runbook entry with its repair; any makes the doctor exit 1.
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and not self.problems


def _roles(config: Config) -> dict[str, int]:
    return {"main": config.slots.main, "background": config.slots.background}


async def _server(config: Config, report: Report) -> None:
    cfg = config.llm
    client = LlamaServerClient(cfg.url, timeout_s=min(cfg.timeout_s, PROBE_TIMEOUT_S))
    try:
        healthy = await client.health()
        report.checks.append(
            Check(
                "server",
                healthy,
                f"{shown_url(cfg.url)}/health " + ("ok" if healthy else "no answer"),
            )
        )
        if not healthy:
            if cfg.backend == "openai":
                report.checks[-1] = await _openai_models(cfg.url)
            return
        try:
            slots = await client.slots()
        except LlmError as exc:
            report.checks.append(Check("slots", True, f"/slots not available ({exc})"))
            return
        by_id = {s.get("id"): s for s in slots if isinstance(s, dict)}
        for role, slot in _roles(config).items():
            if cfg.backend == "openai":
                continue  # such servers have no slots: requests go out without one
            found = by_id.get(slot)
            n_ctx = found.get("n_ctx") if found else None
            report.n_ctx[role] = n_ctx if isinstance(n_ctx, int) else None
            if found is None:
                report.checks.append(
                    Check(
                        f"slot {role}",
                        False,
                        f"[slots] {role} = {slot}, but the server has {len(slots)} slot(s) "
                        "(start llama-server with -np 2 or more)",
                    )
                )
            elif isinstance(n_ctx, int) and n_ctx < config.expect.n_ctx:
                report.checks.append(
                    Check(
                        f"slot {role}",
                        False,
                        f"slot {slot} has n_ctx {n_ctx} < [expect] n_ctx {config.expect.n_ctx}",
                    )
                )
            else:
                report.checks.append(Check(f"slot {role}", True, f"slot {slot} n_ctx {n_ctx}"))
    finally:
        await client.aclose()


async def _openai_models(url: str) -> Check:
    """A generic endpoint may have no /health; /v1/models answering is enough."""
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as http:
            response = await http.get(url.rstrip("/") + "/v1/models")
    except httpx.HTTPError as exc:
        return Check("server", False, f"{url}: {exc or type(exc).__name__}")
    ok = response.status_code == 200
    return Check("server", ok, f"{url}/v1/models HTTP {response.status_code}")


async def _embedded(config: Config, report: Report) -> None:
    from tether.llm.embedded import EmbeddedLlm, default_model_path

    try:
        llm = EmbeddedLlm.from_config(config)
    except TetherError as exc:
        report.checks.append(Check("embedded", False, str(exc)))
        if not config.llm.model_path:
            with contextlib.suppress(TetherError):
                report.model = str(default_model_path())
        return
    report.model = str(llm.model_path)
    report.checks.append(Check("extra", True, "llama-cpp-python and the model file are there"))
    from tether.llm.gguf import context_warning, read_trained_context

    with contextlib.suppress(TetherError):  # unreadable: the load below says why
        trained = read_trained_context(llm.model_path)
        report.n_ctx_train = trained.n_ctx_train
        warning = context_warning(config.expect.n_ctx, trained)
        if warning:
            report.warnings.append(warning)
    try:
        for role, slot in _roles(config).items():
            n_ctx = await asyncio.to_thread(llm.load, slot)
            report.n_ctx[role] = n_ctx
            report.checks.append(Check(f"slot {role}", True, f"context {slot} n_ctx {n_ctx}"))
        done = await llm.complete(
            CompletionRequest(
                messages=(ChatMessage(role="user", content="Say hi."),),
                slot=config.slots.main,
                max_tokens=1,
            )
        )
        report.checks.append(
            Check("completion", True, f"one token in, prompt_n {done.prompt_n}: ok")
        )
    except TetherError as exc:
        report.checks.append(Check("completion", False, str(exc)))
    finally:
        await llm.aclose()


async def diagnose(config: Config) -> Report:
    cfg = config.llm
    model = cfg.model_path if cfg.backend == "embedded" else (cfg.model or "(server's own)")
    report = Report(
        backend=cfg.backend,
        model=model,
        slots=_roles(config),
        expect_n_ctx=config.expect.n_ctx,
    )
    report.warnings.extend(_egress_warnings(config))
    if cfg.backend == "embedded":
        await _embedded(config, report)
    else:
        await _server(config, report)
    return report


def _store(ctx: Context, config: Config, report: Report) -> Check:
    """The store's backend, server version and migration level (``report.store``)."""
    import msgspec

    from tether.stores import migrate_store

    try:
        info = migrate_store(ctx.home, config)
    except TetherError as exc:
        return Check("store", False, str(exc))
    report.store = msgspec.to_builtins(info)
    owner = f", owner {info.owner}" if info.owner else ""
    return Check(
        "store",
        True,
        f"{info.backend} {shown_url(info.where)}{owner}: server {info.server_version},"
        f" schema level {info.level} of {info.known}",
    )


def _private_home(ctx: Context) -> Check:
    """The home is the owner's alone; one made before tether saw to it is fixed here."""
    from tether.home import tighten

    fixed = tighten(ctx.home)
    done = f"made {fixed} path{'s' if fixed != 1 else ''} private" if fixed else "private"
    return Check("home", True, f"{ctx.home}: {done} (folders 0700, files 0600)")


def _egress_warnings(config: Config) -> list[str]:
    if config.tools.tainted_fetch != "any":
        return []
    return [
        '[tools] tainted_fetch = "any": a session that read a web page may fetch any '
        "public URL, so a page can make it send what it knows anywhere (the default "
        '"owner-urls" allows only URLs you wrote and hosts in fetch_allow)'
    ]


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
    config = ctx.config()
    lost = wal_problems(ctx.home, config)  # before anything opens the store
    report = asyncio.run(diagnose(config))
    report.problems += lost
    report.checks.append(_private_home(ctx))  # before SQLite makes files beside the store
    report.problems += store_problems(ctx.home, config)
    report.problems += session_problems(ctx.home)
    report.warnings += torn_tail_warnings(ctx.home)
    report.warnings += wal_warnings(ctx.home, config)
    report.checks.append(_store(ctx, config, report))
    report.warnings.extend(_budget_warnings(ctx))
    report.warnings.extend(_recall_warnings(ctx, config))
    hooks, warning = _hooks(ctx)
    report.checks.append(hooks)
    if warning:
        report.warnings.append(warning)
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


def _budget_warnings(ctx: Context) -> list[str]:
    """A line per job kind and reason the budget gate refused today (the owner's day)."""
    from zoneinfo import ZoneInfo

    from tether.agent.budget import hits
    from tether.core.budget import local_day
    from tether.daemon.compose import home_zone

    try:
        with ctx.sweep_reader() as sweep:
            zone = home_zone(sweep)
        day = local_day(ZoneInfo(zone), ctx.now()).isoformat()
        with ctx.store() as store:
            found = hits(store.budget_rows(day), day)
    except TetherError as exc:
        return [f"budget: the spend ledger cannot be read ({exc})"]
    return [
        f"budget: {kind} hit its budget today ({reason}, {n} call(s) refused; `tether usage`)"
        for (kind, reason), n in sorted(found.items())
    ]


def _recall_warnings(ctx: Context, config: Config) -> list[str]:
    """One line when recall is lexical (the extra absent, vectors off or incomplete)."""
    from tether.daemon.vectors import lexical_reason

    try:
        with ctx.store():  # opened (and migrated) first, as the daemon does
            reason = lexical_reason(ctx.home, config)
    except TetherError as exc:
        return [f"recall: the vectors cannot be read ({exc})"]
    return [] if reason is None else [reason]


def _hooks(ctx: Context) -> tuple[Check, str | None]:
    """The harness hooks' hard-error rate over the last day (``telemetry/heartbeat.jsonl``);
    typed degrades (skips, deadlines, no daemon) are not errors. Never fails the doctor:
    a hook that fails still exits 0 and its harness goes on."""
    from datetime import timedelta

    from tether.checkpoint.telemetry import hard_error_rate

    rate = hard_error_rate(ctx.home, ctx.now(), timedelta(days=1))
    detail = (
        f"hard-error rate {rate.rate:.0%} ({rate.errors} of {rate.runs} runs in the last 24 h)"
        if rate.runs
        else "no hook run in the last 24 h"
    )
    warning = None
    if rate.errors:
        warning = f"hooks: {rate.errors} hard error(s) in the last 24 h ({', '.join(rate.names)})"
    return Check("hooks", True, detail), warning


COMMANDS = [doctor_cmd]
