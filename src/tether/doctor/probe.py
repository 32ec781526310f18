"""``tether doctor``'s probe of the inference backend: for a server, whether it answers
(``/health``, ``/slots`` where the server has it, a generic endpoint's ``/v1/models``) and
each slot's context; for the embedded backend, whether the extra is installed, the model
file loads, and a one-token completion runs."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import httpx

from tether.config import Config
from tether.doctor.integrity import Problem
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
    #: Damage found in the store or the session logs (``doctor.integrity.Problem``), each
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
    report.warnings.extend(egress_warnings(config))
    if cfg.backend == "embedded":
        await _embedded(config, report)
    else:
        await _server(config, report)
    return report


def egress_warnings(config: Config) -> list[str]:
    if config.tools.tainted_fetch != "any":
        return []
    return [
        '[tools] tainted_fetch = "any": a session that read a web page may fetch any '
        "public URL, so a page can make it send what it knows anywhere (the default "
        '"owner-urls" allows only URLs you wrote and hosts in fetch_allow)'
    ]
