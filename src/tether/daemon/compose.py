"""Build a runtime from a home and its config. The only place the pieces are wired."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tether.agent.turn import Agent
from tether.config import Config
from tether.errors import BadInputError
from tether.llm.llama_server import LlamaServerClient
from tether.llm.openai_compat import OpenAiCompatClient
from tether.ports import Clock, Llm, Store
from tether.scheduler import Job, Scheduler
from tether.stores import open_store
from tether.tools.box import ToolBox


class SystemClock:
    """The wall clock, in UTC. Only the composition root reads it."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def build_llm(config: Config) -> Llm:
    cfg = config.llm
    if cfg.backend == "llama":
        return LlamaServerClient(cfg.url, timeout_s=cfg.timeout_s, model=cfg.model)
    if cfg.backend == "openai":
        return OpenAiCompatClient(cfg.url, timeout_s=cfg.timeout_s, model=cfg.model)
    if cfg.backend == "embedded":
        from tether.llm.embedded import EmbeddedLlm  # needs the extra tether[local]

        return EmbeddedLlm.from_config(config)
    raise BadInputError(f"unknown llm.backend {cfg.backend!r}")


@dataclass
class Runtime:
    home: Path
    config: Config
    store: Store
    llm: Llm
    http: httpx.AsyncClient
    agent: Agent

    async def aclose(self) -> None:
        await self.llm.aclose()
        await self.http.aclose()
        self.store.close()


def build_runtime(
    home: Path, config: Config, *, clock: Clock | None = None, llm: Llm | None = None
) -> Runtime:
    store = open_store(home, config)
    try:
        model = llm if llm is not None else build_llm(config)
    except BaseException:
        store.close()
        raise
    http = httpx.AsyncClient(headers={"user-agent": "tether"})
    tools = ToolBox(home, store, config, http)
    agent = Agent(
        home=home, config=config, store=store, llm=model, tools=tools, clock=clock or SystemClock()
    )
    return Runtime(home=home, config=config, store=store, llm=model, http=http, agent=agent)


def build_scheduler(runtime: Runtime, jobs: Sequence[Job]) -> Scheduler:
    """The daemon's scheduler over a runtime (its agent, clock, gates and busy set). Every
    turn of the runtime, scheduled or not, queues its tool-output summaries."""
    scheduler = Scheduler(agent=runtime.agent, jobs=jobs)
    runtime.agent.after_turn.append(scheduler.summaries.after_turn)
    return scheduler
