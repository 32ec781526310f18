"""``tether demo``: tether's main job, live, with an embedded model and no server.

In a home of its own, with a small ``n_ctx`` so the session compacts within a few turns:
owner turns on the main slot; a distinctive fact added to identity the way the owner's
``tether memory add`` does; owner turns until the session compacts into epoch 1 (raw window
banked, summary on the background slot, the fact in the new baseline); a turn in epoch 1;
a heartbeat through the scheduler's own ``Heartbeat`` on the background slot; and a
``recall`` that finds a phrase said in epoch 0. Every step checks that it did what it
claims; the first that did not stops the demo and names itself.

The logic lives here, the choice of home too (a temporary one, removed after, unless the
owner names one to keep), and it reports through ``on_event``; ``tether.cli.commands_demo``
draws it. A small recording wrapper around the model (``App.wrap_llm``: the application
opens the model, as it opens the store) keeps each request's slot and cache use, so the
demo can show (and check) where every request ran.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from tether.agent.compaction import CompactionDone
from tether.config import load_config
from tether.core.timing.scheduling import HEARTBEAT_SESSION
from tether.daemon.app import App
from tether.daemon.compose import Runtime, build_runtime
from tether.errors import BadInputError, TetherError
from tether.home import init_home
from tether.llm.embedded import require_extra
from tether.memory.identity import Identity
from tether.memory.recall import recall
from tether.ports import Llm
from tether.records import Assistant, Completion, CompletionRequest, Usage
from tether.scan.allow import home_allow
from tether.scan.screen import screen
from tether.scheduler.heartbeat import Heartbeat
from tether.sessions import Session

SESSION = "demo"
#: The fact the owner adds to identity; it must be in epoch 1's baseline.
FACT = "The owner's sailing boat is called Marigold Seven."
#: Said in the first turn (epoch 0); recall must find that turn after compaction.
PHRASE = "blue ceramic frog"
OWNER_TURNS = (
    f"Hi! Please remember: the spare house key is under the {PHRASE} by the back door.",
    "I am planning a sailing trip along the coast in June with my sister Ada.",
    "We want to stop at three harbours and sleep on the boat every night.",
    "Ada is bringing her guitar and I am bringing the charts and a small stove.",
    "What should we pack for rain, and what food keeps well on a small boat?",
    "The first harbour is Porthleven; we plan to arrive on the fifth of June.",
    "Remind me to check the tide tables and the weather forecast every morning.",
    "After the trip I want to write a short travel journal about it.",
    "We also need a first-aid kit and spare batteries for the radio.",
    "The second harbour is Fowey and the third is Falmouth, where we turn back.",
    "If the wind is over force six we stay in harbour and play cards instead.",
    "Thanks. That is all for now about the trip.",
)
EPOCH1_TURN = "Good morning. What is the name of my boat?"

#: A small context so that a few turns fill it to the compaction threshold.
DEMO_CONFIG = """\
# Written by `tether demo`: the embedded model, a small context that compacts quickly.
[llm]
backend = "embedded"
timeout_s = 120
max_tokens = 40

[expect]
n_ctx = 1024

[compact]
threshold = 0.5
summary_chars = 600
summarise = []

[heartbeat]
every_s = 3600

[tools]
granted = []
"""


class DemoStepError(TetherError):
    """A demo step did not do what it claims."""

    def __init__(self, step: str, problem: str) -> None:
        super().__init__(f"demo step {step!r} failed: {problem}")
        self.step = step
        self.problem = problem


@dataclass(frozen=True)
class Sent:
    """One request the model answered: where it ran and what it reused."""

    slot: int | None
    cache_n: int
    prompt_n: int
    predicted_n: int


class Recording:
    """The demo's model: the real backend, keeping each answered request's slot and usage."""

    def __init__(self, inner: Llm) -> None:
        self.inner = inner
        self.sent: list[Sent] = []

    async def complete(self, request: CompletionRequest) -> Completion:
        done = await self.inner.complete(request)
        self.sent.append(Sent(request.slot, done.cache_n, done.prompt_n, done.predicted_n))
        return done

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass(frozen=True)
class Event:
    """Something that happened: ``step`` names the step, ``text`` says what, ``done``
    marks the step's last event."""

    step: str
    text: str
    done: bool = False


@dataclass
class Demo:
    home: Path
    on_event: Callable[[Event], None]
    started: float = field(default_factory=time.perf_counter)

    def say(self, step: str, text: str, done: bool = False) -> None:
        self.on_event(Event(step, text, done))


STEPS = ("model", "owner turns", "memory add", "compaction", "epoch 1", "heartbeat", "recall")


def prepare_home(home: Path) -> None:
    """A fresh demo home: refuses a folder that already holds a tether home."""
    if (home / "tether.toml").exists():
        raise BadInputError(
            f"{home} already holds a tether home; `tether demo --home` needs a new or empty folder"
        )
    init_home(home)
    (home / "tether.toml").write_text(DEMO_CONFIG, encoding="utf-8")


def _usage_text(usage: Usage | None) -> str:
    if usage is None:
        return "no usage"
    return f"cache_n {usage.cache_n}, prompt_n {usage.prompt_n}, predicted_n {usage.predicted_n}"


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


async def run_demo(demo: Demo) -> None:
    """Every step, in order; raises DemoStepError naming the first that failed."""
    home = demo.home
    config = load_config(home)
    app = App(home, config)
    try:
        model = app.wrap_llm(Recording)
    except BaseException:
        app.close()
        raise
    rt = build_runtime(home, config, app=app)  # closes the app, or its aclose does
    try:
        await _steps(demo, rt, model)
    finally:
        await rt.aclose()


async def _steps(demo: Demo, rt: Runtime, model: Recording) -> None:
    path = getattr(model.inner, "model_path", "?")
    n_ctx = rt.config.expect.n_ctx
    demo.say("model", f"embedded model {Path(str(path)).name}, n_ctx {n_ctx} per slot", done=True)
    turns = iter(OWNER_TURNS)
    phrase_turn = await _owner_turns(demo, rt, turns)
    _memory_add(demo, rt)
    await _compaction(demo, rt, model, turns)
    await _epoch1(demo, rt)
    await _heartbeat(demo, rt, model)
    _recall(demo, rt, phrase_turn)


async def _owner_turns(demo: Demo, rt: Runtime, turns: Iterator[str]) -> tuple[int, int]:
    """Two turns on the main slot; the second must reuse the first's cached prefix.
    Returns (turn, epoch) of the first, which holds PHRASE."""
    main = rt.config.slots.main
    first: tuple[int, int] | None = None
    usage: Usage | None = None
    for _ in range(2):
        done = await rt.agent.run_turn(SESSION, next(turns))
        first = first or (done.turn, done.epoch)
        usage = done.usage
        demo.say(
            "owner turns",
            f"turn {done.turn} epoch {done.epoch} slot {done.slot}: {_usage_text(usage)}"
            f" → {_short(done.reply)!r}",
        )
        if done.slot != main or done.epoch != 0:
            raise DemoStepError("owner turns", f"turn {done.turn} ran on slot {done.slot}")
    if usage is None or usage.cache_n == 0 or first is None:
        raise DemoStepError("owner turns", "the second turn reused nothing of the main cache")
    demo.say("owner turns", f"main slot cache reused: {usage.cache_n} tokens", done=True)
    return first


def _memory_add(demo: Demo, rt: Runtime) -> None:
    """What the owner's ``tether memory add`` does."""
    identity = Identity(rt.home, rt.store)
    fact = screen(FACT, what="identity entry", allow=home_allow(rt.home), on_secret="refuse")
    entry = identity.add(fact, who="owner", session=None, time=rt.agent.clock.now())
    if not any(e.id == entry.id for e in identity.entries()):
        raise DemoStepError("memory add", f"{FACT!r} is not in memory/memory.md")
    demo.say("memory add", f"identity [{entry.id}] {entry.text}", done=True)


async def _compaction(demo: Demo, rt: Runtime, model: Recording, turns: Iterator[str]) -> None:
    """Owner turns until the session is due, then compaction into epoch 1."""
    config = rt.config
    background = config.slots.background
    compaction: CompactionDone | None = None
    for text in turns:
        done = await rt.agent.run_turn(SESSION, text)
        demo.say(
            "compaction",
            f"turn {done.turn} epoch {done.epoch}: {_usage_text(done.usage)}"
            f" (compacts at {config.compact.threshold:.0%} of {config.expect.n_ctx})",
        )
        compaction = await rt.agent.compact_if_due(SESSION)
        if compaction is not None:
            break
    if compaction is None:
        raise DemoStepError("compaction", f"no compaction after {len(OWNER_TURNS)} turns")
    if (compaction.from_epoch, compaction.to_epoch) != (0, 1):
        raise DemoStepError(
            "compaction", f"went {compaction.from_epoch} -> {compaction.to_epoch}, not 0 -> 1"
        )
    bank = compaction.bank
    if bank is None or bank.link is None:
        raise DemoStepError("compaction", "the epoch-0 window was not banked")
    if compaction.source == "model" and not any(s.slot == background for s in model.sent):
        raise DemoStepError("compaction", "the summary did not run on the background slot")
    baseline = (rt.home / "sessions" / SESSION / "1.baseline.json").read_text(encoding="utf-8")
    if FACT not in baseline:
        raise DemoStepError("compaction", "the identity fact is not in 1.baseline.json")
    demo.say(
        "compaction",
        f"banked {bank.bytes} bytes as {bank.link} ({bank.code}); summary by the "
        f"{compaction.source} on slot {background}, {compaction.summary_chars} chars",
    )
    demo.say("compaction", f"epoch 0 -> 1; 1.baseline.json holds {FACT!r}", done=True)


async def _epoch1(demo: Demo, rt: Runtime) -> None:
    done = await rt.agent.run_turn(SESSION, EPOCH1_TURN)
    if done.epoch != 1 or done.slot != rt.config.slots.main:
        raise DemoStepError("epoch 1", f"the turn ran in epoch {done.epoch} on slot {done.slot}")
    demo.say(
        "epoch 1",
        f"turn {done.turn} epoch 1 slot {done.slot}: {_usage_text(done.usage)}"
        f" → {_short(done.reply)!r}",
        done=True,
    )


async def _heartbeat(demo: Demo, rt: Runtime, model: Recording) -> None:
    """One beat through the scheduler's own Heartbeat (as ``tether serve`` runs it)."""
    background = rt.config.slots.background
    before = len(model.sent)
    now = rt.agent.clock.now()
    every = timedelta(seconds=rt.config.heartbeat.every_s)
    beat = Heartbeat(agent=rt.agent, start=now - every, on_done=lambda: None)
    outcome = beat.tick(now)
    if outcome != "started" or beat.task is None:
        raise DemoStepError("heartbeat", f"the beat did not start ({outcome})")
    await beat.task
    sent = model.sent[before:]
    hb = Session.open(rt.home, HEARTBEAT_SESSION)
    answered = [r for r in hb.records if isinstance(r, Assistant)]
    if not sent or any(s.slot != background for s in sent) or hb.slot != background:
        raise DemoStepError("heartbeat", "the heartbeat did not run on the background slot")
    if not answered:
        raise DemoStepError("heartbeat", "the heartbeat turn has no answer in its log")
    demo.say(
        "heartbeat",
        f"session {HEARTBEAT_SESSION} slot {hb.slot}: cache_n {sent[-1].cache_n}, prompt_n "
        f"{sent[-1].prompt_n} → {_short(answered[-1].text)!r}",
        done=True,
    )


def _recall(demo: Demo, rt: Runtime, phrase_turn: tuple[int, int]) -> None:
    hits = recall(rt.store, PHRASE, 3, time=rt.agent.clock.now(), home=rt.home, sweep=rt.sweep)
    for hit in hits:
        demo.say(
            "recall", f"hit {hit.kind} session={hit.session} turn={hit.turn}: {_short(hit.text)}"
        )
    turn, epoch = phrase_turn
    found = any(h.session == SESSION and h.turn == turn for h in hits)
    if not found or epoch != 0:
        raise DemoStepError("recall", f"{PHRASE!r} was not found in epoch 0 of {SESSION!r}")
    demo.say("recall", f"{PHRASE!r} found: session {SESSION} turn {turn} (epoch 0)", done=True)


@dataclass(frozen=True)
class Ran:
    """A demo that passed: its wall time in seconds, and the home it kept (None: a
    temporary one, removed)."""

    elapsed: float
    kept: Path | None


def run(home: Path | None, on_event: Callable[[Event], None]) -> Ran:
    """Every step in ``home`` (new or empty, kept after), else in a temporary home removed
    after; raises DemoStepError naming the first step that failed."""
    require_extra()  # before the home is made, so a retry after installing finds it new
    if home is not None:
        return Ran(_run(home.absolute(), on_event), home)
    with tempfile.TemporaryDirectory(prefix="tether-demo-") as tmp:
        return Ran(_run(Path(tmp) / "home", on_event), None)


def _run(home: Path, on_event: Callable[[Event], None]) -> float:
    prepare_home(home)
    demo = Demo(home, on_event)
    asyncio.run(run_demo(demo))
    return time.perf_counter() - demo.started
