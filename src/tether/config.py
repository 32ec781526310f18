"""tether.toml -> frozen typed sections. Unknown keys, wrong types and bad values are errors.

Every key is documented in ``docs/configuration.md``; keep the two in step.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from tether.errors import ConfigError

CONFIG_FILE = "tether.toml"

#: Tools tether knows by name; ``[compact] summarise`` may only name these.
KNOWN_TOOLS = frozenset(
    {"recall", "add", "remove", "consolidate", "note", "http_fetch", "page_read"}
)

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]


class _Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class LlmConfig(_Section, frozen=True):
    backend: Literal["llama", "openai", "embedded"] = "llama"
    url: str = "http://127.0.0.1:8080"
    model: str = ""
    model_path: str = ""
    timeout_s: Annotated[float, msgspec.Meta(gt=0.0)] = 120.0
    max_tokens: Annotated[int, msgspec.Meta(ge=16)] = 1024

    def __post_init__(self) -> None:
        if self.backend != "embedded" and not re.match(r"https?://[^\s/]+", self.url):
            raise ValueError("Expected an http:// or https:// URL - at `$.url`")


class ExpectConfig(_Section, frozen=True):
    n_ctx: Annotated[int, msgspec.Meta(ge=256)] = 32768


class SlotsConfig(_Section, frozen=True):
    main: NonNegativeInt = 0
    background: NonNegativeInt = 1


class MemoryConfig(_Section, frozen=True):
    block_tokens: PositiveInt = 3000
    #: Notes in the tiering listing (the tier job's text, ``memory tiers``): the most
    #: recalled; a line says how many more there are.
    tiers_notes: PositiveInt = 200


class JobsConfig(_Section, frozen=True):
    #: Runs ``jobs/runs.jsonl`` keeps (plus each job's last start and record, and runs
    #: still open, whatever their age).
    keep_runs: PositiveInt = 1000


class CompactConfig(_Section, frozen=True):
    threshold: Fraction = 0.85
    summary_chars: PositiveInt = 4000
    summarise: tuple[str, ...] = ("http_fetch",)

    def __post_init__(self) -> None:
        for name in self.summarise:
            if name not in KNOWN_TOOLS:
                known = ", ".join(sorted(KNOWN_TOOLS))
                raise ValueError(f"Unknown tool {name!r} (known: {known}) - at `$.summarise`")


class HeartbeatConfig(_Section, frozen=True):
    every_s: NonNegativeInt = 0
    prompt: str = "heartbeat.md"

    def __post_init__(self) -> None:
        if not self.prompt or "/" in self.prompt or self.prompt in {".", ".."}:
            raise ValueError(
                "Expected a file name in the home's config/ folder, not a path - at `$.prompt`"
            )


class StoreConfig(_Section, frozen=True):
    #: Empty: SQLite at ``<home>/tether.db``; ``sqlite:///PATH``: SQLite at PATH (relative
    #: to the home); ``postgresql://...``: a PostgreSQL database (extra tether[postgres]).
    url: str = ""
    #: Whose memory this home is in a shared PostgreSQL database: every read and write is
    #: scoped to it (its own schema, ``tether_<owner>``). Unused by SQLite.
    owner: str = "owner"

    def __post_init__(self) -> None:
        if self.url and not self.url.startswith(("postgresql://", "postgres://", "sqlite:///")):
            raise ValueError(
                "Expected empty (SQLite), sqlite:///PATH or a postgresql:// URL - at `$.url`"
            )
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,47}", self.owner):
            raise ValueError(
                "Expected 1 to 48 characters of a-z, 0-9, '-' and '_', starting with a letter"
                f" or digit, got {self.owner!r} - at `$.owner`"
            )

    @property
    def postgres(self) -> bool:
        return self.url.startswith(("postgresql://", "postgres://"))


def _check_tools(names: tuple[str, ...], at: str) -> None:
    for name in names:
        if name not in KNOWN_TOOLS:
            known = ", ".join(sorted(KNOWN_TOOLS))
            raise ValueError(f"Unknown tool {name!r} (known: {known}) - at `$.{at}`")


class JobGrants(_Section, frozen=True):
    granted: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_tools(self.granted, "granted")


#: A cron job's name (``core.timing.scheduling`` holds the grammar; config imports no core).
_JOB_NAME = re.compile(r"[a-z0-9-]{1,48}")
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?", re.I)


def allow_entry_problem(entry: str) -> str | None:
    """What is wrong with a ``[tools] fetch_allow`` entry (None: nothing). The same
    grammar as ``core.egress.parse_allow``, which a property test holds it to."""
    text = entry.strip()
    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        if not close:
            return "unclosed '[' (write an IPv6 address as [::1]:8080)"
        if rest and not rest.startswith(":"):
            return "expected ':<port>' after ']'"
        return _v6_problem(host) or (_port_problem(rest[1:]) if rest else None)
    if text.count(":") >= 2:
        return _v6_problem(text)
    if "/" in text or "*" in text:
        return "expected a host or host:port, without a scheme, path or wildcard"
    host, sep, port = text.partition(":")
    if not _HOST_NAME.fullmatch(host):
        return (
            "expected a host name or address, optionally with :port (no scheme, path or wildcard)"
        )
    return _port_problem(port) if sep else None


def _v6_problem(host: str) -> str | None:
    try:
        ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return f"{host!r} is not an IPv6 address (with a port: [::1]:8080)"
    return None


def _port_problem(port: str) -> str | None:
    if re.fullmatch(r"[0-9]{1,5}", port) and 1 <= int(port) <= 65535:
        return None
    return "the port must be a number from 1 to 65535"


class ToolsConfig(_Section, frozen=True):
    granted: tuple[str, ...] = tuple(sorted(KNOWN_TOOLS))
    step_limit: Annotated[int, msgspec.Meta(ge=1, le=64)] = 8
    result_chars: Annotated[int, msgspec.Meta(ge=256)] = 8000
    fetch_timeout_s: Annotated[float, msgspec.Meta(gt=0.0)] = 15.0
    fetch_max_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 1_000_000
    # -- egress (issue 24): see "Trust and egress" in docs/architecture.md ------------
    fetch_allow: tuple[str, ...] = ()
    tainted_fetch: Literal["owner-urls", "allow-list", "any"] = "owner-urls"
    #: Scheduled sessions' own grants, instead of ``granted``: ``[tools.heartbeat]`` and
    #: ``[tools.jobs.<job name>]`` (the tiering job ``tier`` has no http_fetch unless
    #: its table grants it).
    heartbeat: JobGrants | None = None
    jobs: dict[str, JobGrants] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_tools(self.granted, "granted")
        for entry in self.fetch_allow:
            problem = allow_entry_problem(entry)
            if problem:
                raise ValueError(f"{entry!r}: {problem} - at `$.fetch_allow`")
        for name in self.jobs:
            if not _JOB_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is no job name (1 to 48 characters of a-z, 0-9 and '-', "
                    "the name of a file jobs/<name>.toml) - at `$.jobs`"
                )


class SweepConfig(_Section, frozen=True):
    enabled: bool = False
    kill_switch: bool = False
    #: Owner ids in the rollout cohort; "*" is every owner. Anything else is out.
    cohort: tuple[str, ...] = ("*",)
    # -- the model pass over a completed day (issue 18) ----------------------------------
    #: The day's spine (summaries and session-day digests) is cut at this many characters.
    spine_chars: Annotated[int, msgspec.Meta(ge=1000, le=400_000)] = 24_000
    #: Each raw excerpt phase A may ask for (at most 8) is cut at this many characters.
    excerpt_chars: Annotated[int, msgspec.Meta(ge=200, le=20_000)] = 2_000
    #: Prices of the model pass, USD per million tokens in and out (0: a local model).
    model_usd_per_mtok_in: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0
    model_usd_per_mtok_out: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0
    #: The ceiling of one owner-day (digests and both phases), checked before any call.
    max_model_tokens: Annotated[int, msgspec.Meta(ge=0)] = 200_000
    max_model_cost_usd: Annotated[float, msgspec.Meta(ge=0.0)] = 0.80
    #: ``tether serve`` sweeps a day this many seconds after it ended locally.
    settle_s: Annotated[int, msgspec.Meta(ge=0, le=86_400)] = 900

    def __post_init__(self) -> None:
        for owner in self.cohort:
            if owner != "*" and not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", owner):
                raise ValueError(f'Expected owner ids or "*", got {owner!r} - at `$.cohort`')


# -- [budget]: hard caps on background model calls (issue 23) --------------------------

#: Background job kinds that a ``[budget.<kind>]`` table may cap. ``sweep`` and ``harvest``
#: are reserved for the sweep's model pass and the checkpoint harvest, which use the same
#: gate when they land.
BUDGET_KINDS = ("compaction", "tool_summary", "heartbeat", "cron", "sweep", "harvest")
Usd = Annotated[float, msgspec.Meta(ge=0.0)]


class KindBudget(_Section, frozen=True):
    #: The most one request may use: its prompt tokens plus its ``max_tokens``.
    call_tokens: NonNegativeInt | None = None
    #: Tokens per local day for this kind.
    day_tokens: NonNegativeInt | None = None


class BudgetConfig(_Section, frozen=True):
    day_usd: Usd | None = None
    usd_per_mtok_in: Usd = 0.0
    usd_per_mtok_out: Usd = 0.0
    usd_per_mtok_cached: Usd = 0.0
    live_day_tokens: NonNegativeInt | None = None
    compaction: KindBudget = msgspec.field(default_factory=KindBudget)
    tool_summary: KindBudget = msgspec.field(default_factory=KindBudget)
    heartbeat: KindBudget = msgspec.field(default_factory=KindBudget)
    cron: KindBudget = msgspec.field(default_factory=KindBudget)
    sweep: KindBudget = msgspec.field(default_factory=KindBudget)
    harvest: KindBudget = msgspec.field(default_factory=KindBudget)

    def __post_init__(self) -> None:
        # TOML spells nan and inf; neither is a price or a ceiling.
        for key in ("day_usd", "usd_per_mtok_in", "usd_per_mtok_out", "usd_per_mtok_cached"):
            value = getattr(self, key)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"Expected a finite number of US dollars - at `$.{key}`")

    def kind(self, name: str) -> KindBudget:
        budget: KindBudget = getattr(self, name)
        return budget


class McpConfig(_Section, frozen=True):
    #: Tokens (``tether.core.context.tokens``) one ``recall`` result of ``tether mcp`` may hold.
    result_tokens: Annotated[int, msgspec.Meta(ge=100)] = 1200


class CheckpointConfig(_Section, frozen=True):
    """Checkpoint compaction for harnesses (issue 19): the hooks, the harvest, the pack."""

    #: Tokens of the context pack a SessionStart hook prints (``core.context.tokens`` counts).
    pack_tokens: PositiveInt = 1500
    #: Unset: on once the hooks are installed; false: banked windows are retired, never
    #: extracted (``tether transcripts ingest --facts`` is never gated).
    auto_writeback: bool | None = None
    #: The PreCompact hook's deadline: bytes durable inside it, or a typed skip.
    deadline_s: Annotated[float, msgspec.Meta(gt=0.0, le=60.0)] = 3.0


class RecallConfig(_Section, frozen=True):
    #: Sentence vectors fused with lexical recall (the extra tether[vectors]): "auto" uses
    #: them when the extra is installed, true requires it, false never loads the model.
    vectors: Literal["auto"] | bool = "auto"


class ExtractConfig(_Section, frozen=True):
    """Fact extraction (the checkpoint harvest, the sweep's model pass)."""

    #: "model": the model, and the extractive path (no model) only when the model is
    #: absent, refused or fails; "extractive": never a model call; "both": the model and
    #: the extractive path merged; "auto": "extractive" for the bundled model (on LoCoMo's
    #: tuning half its facts added no match and cost precision: benchmarks/RESULTS.md),
    #: else "model".
    mode: Literal["auto", "model", "extractive", "both"] = "auto"
    #: The model's reply: "page" (the full candidate page), "list" (a flat list of short
    #: facts with turn numbers, for small models); "auto": "list" for the bundled model
    #: (backend "embedded" with no model_path), else "page".
    form: Literal["auto", "page", "list"] = "auto"
    #: Characters of transcript per harvest call; 0: by form (page 16000, list 1500).
    chunk_chars: NonNegativeInt = 0

    def resolved_form(self, llm: LlmConfig) -> Literal["page", "list"]:
        if self.form != "auto":
            return self.form
        return "list" if llm.backend == "embedded" and not llm.model_path else "page"

    def resolved_mode(self, llm: LlmConfig) -> Literal["model", "extractive", "both"]:
        if self.mode != "auto":
            return self.mode
        return "extractive" if self.resolved_form(llm) == "list" else "model"

    def resolved_chunk_chars(self, llm: LlmConfig) -> int:
        if self.chunk_chars:
            return self.chunk_chars
        return 1500 if self.resolved_form(llm) == "list" else 16_000


class Config(_Section, frozen=True):
    llm: LlmConfig = msgspec.field(default_factory=LlmConfig)
    expect: ExpectConfig = msgspec.field(default_factory=ExpectConfig)
    slots: SlotsConfig = msgspec.field(default_factory=SlotsConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    compact: CompactConfig = msgspec.field(default_factory=CompactConfig)
    heartbeat: HeartbeatConfig = msgspec.field(default_factory=HeartbeatConfig)
    jobs: JobsConfig = msgspec.field(default_factory=JobsConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    sweep: SweepConfig = msgspec.field(default_factory=SweepConfig)
    budget: BudgetConfig = msgspec.field(default_factory=BudgetConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    recall: RecallConfig = msgspec.field(default_factory=RecallConfig)
    checkpoint: CheckpointConfig = msgspec.field(default_factory=CheckpointConfig)
    extract: ExtractConfig = msgspec.field(default_factory=ExtractConfig)

    def __post_init__(self) -> None:
        if self.slots.main == self.slots.background:
            raise ValueError(
                "Expected [slots] main and background to differ, so background work never "
                "evicts the live cache - at `$.slots.background`"
            )


_AT = re.compile(r"^(?P<problem>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]*)`")


def _dotted(path: str) -> str:
    """``$.llm.timeout_s`` or ``$.compact.summarise[0]`` -> ``llm.timeout_s``."""
    return re.sub(r"\[\d+\]", "", path.removeprefix("$").lstrip("."))


def explain_validation(message: str) -> tuple[str | None, str]:
    """Turn a msgspec validation message into (dotted key, what was expected)."""
    # A __post_init__ error inside a nested section arrives with the section's path
    # appended after the inner `- at` we wrote ourselves; keep both parts of the path.
    paths = re.findall(r" - at `(\$[^`]*)`", message)
    problem = re.sub(r" - at `\$[^`]*`", "", message).strip()
    key = ""
    for p in reversed(paths):
        part = _dotted(p)
        key = f"{key}.{part}" if key and part else (key or part)
    unknown = _UNKNOWN.search(problem)
    if unknown:
        field = unknown.group("field")
        key = f"{key}.{field}" if key else field
        problem = "unknown key (not a tether setting; see docs/configuration.md)"
    else:
        problem = problem[0].lower() + problem[1:] if problem else "invalid value"
    return (key or None), problem


def parse_config(text: str, path: Path | str = CONFIG_FILE) -> Config:
    """Parse tether.toml text strictly; raise ConfigError naming the file and dotted key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, None, f"not valid TOML: {exc}") from None
    try:
        return msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        key, problem = explain_validation(str(exc))
        raise ConfigError(path, _job_key(raw, key), problem) from None


def _job_key(raw: dict[str, object], key: str | None) -> str | None:
    """msgspec names a table inside ``[tools.jobs]`` ``jobs[...]``: name the job."""
    if key is None or "jobs[...]" not in key:
        return key
    tools = raw.get("tools")
    jobs = tools.get("jobs") if isinstance(tools, dict) else None
    for name, table in jobs.items() if isinstance(jobs, dict) else ():
        try:
            msgspec.convert(table, JobGrants)
        except msgspec.ValidationError:
            return key.replace("jobs[...]", f"jobs.{name}")
    return key


def load_config(home: Path) -> Config:
    """Read ``<home>/tether.toml``; a missing file is an error pointing at ``tether init``."""
    return load_config_file(home / CONFIG_FILE)


def load_config_file(path: Path) -> Config:
    """Read a ``tether.toml`` at ``path`` (a home's, or one a sweep worker is given)."""
    try:
        text = _read_config(path)
    except FileNotFoundError:
        raise ConfigError(path, None, "no such file; run `tether init` first") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"cannot read: {exc}") from None
    return parse_config(text, path)


#: The most of a tether.toml that is read (a real one is a few KiB).
CONFIG_BYTES = 1024 * 1024


def _read_config(path: Path) -> str:
    """The config's text. It may be a link (a dotfiles manager links it in), but it must
    be a regular file (a FIFO would block, /dev/zero never ends) of at most CONFIG_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(path, None, "not a regular file")
        os.set_blocking(fd, True)
        data = handle.read(CONFIG_BYTES + 1)
    if len(data) > CONFIG_BYTES:
        raise ConfigError(path, None, f"larger than {CONFIG_BYTES // 1024} KiB")
    return data.decode("utf-8")
