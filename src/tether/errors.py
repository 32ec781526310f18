"""Every error tether raises on purpose, in one tree.

Each line names a class, what it means and, in parentheses at the end, what it carries.
A class exits as its parent does: ``exit N`` on a line is where the code changes, so
everything exits 1 but what hangs off ``BadInputError`` or ``NotFoundError`` (exit 2), and
``StoreVersionError`` (exit 2: upgrade tether).
Most classes live here; one raised by a single use case lives next to it, and its line
starts with that module (``[agent.turn]`` is ``tether.agent.turn``); a line without one
lives where its parent does. ``tests/test_errors.py`` checks the drawing against the
classes: every subclass drawn, under its real parent, in its module, with its exit code.

::

    TetherError                      exit 1 unless a subclass says otherwise
    ├── BadInputError                exit 2: the user gave us something we cannot use
    │   ├── ConfigError              tether.toml (file, dotted key, what was expected)
    │   ├── InvalidIdError           a session id (or other name) outside its grammar
    │   ├── ScanFileError            a line of a home's scan file that cannot be used (file, line)
    │   │   ├── AllowListError       ... of .tether-scan-allow: no fingerprint
    │   │   └── BlocklistError       ... of .tether-scan-blocklist: no usable term or pattern
    │   ├── SecretInInputError       text for memory that holds a secret (what, line, rule)
    │   ├── ManagedBlockError        AGENTS.md's tether block markers are malformed (file, line)
    │   ├── SettingsFileError        a harness's settings or MCP file that ``tether setup`` or
    │   │                            ``hook install`` will not edit; none was written (the message)
    │   ├── ImportFormatError        a line of an import file (file and line)
    │   │   └── ImportChangedError   ... that changed between the import's check and write
    │   ├── MessageTooLargeError     [agent.outcomes] a message that cannot fit even a fresh epoch;
    │   │                            refused before it is logged (bytes, tokens, n_ctx)
    │   ├── ExtraMissingError        an optional extra is not installed (extra, how to install)
    │   ├── UnsafeHomePathError      a file in the home that is a symbolic link or not a regular
    │   │                            file: never followed, read or written through (path, what)
    │   ├── IdentityError            [memory.identity] an identity edit that cannot be applied:
    │   │                            an unknown entry id, no text (the message only)
    │   ├── ScheduleError            [core.timing.cron_expr] a schedule outside the grammar, out
    │   │                            of range or never due (schedule, problem)
    │   ├── InvalidJobNameError      [core.timing.scheduling] a job name outside its grammar (name)
    │   ├── JobFileError             [scheduler.jobs] a jobs/<name>.toml that cannot be used;
    │   │                            the daemon does not start (file, problem)
    │   ├── BadZoneError             [core.sweep.windows] not an IANA zone name (name)
    │   ├── BadDateError             [core.sweep.windows] a local date not YYYY-MM-DD (value)
    │   ├── FenceError               [core.mcp] a link outside an MCP client's lane: a remote
    │   │                            client asked for a transcript, segment, note or identity,
    │   │                            or a page or fact not world-visible (lane, link)
    │   ├── TokenFileError           [mcp.tokens] <home>/mcp/tokens cannot be read; every HTTP
    │   │                            request is refused until it is fixed (file, problem)
    │   ├── OwnerExistsError         [core.sweep.errors] ``owner add`` of an id that exists or
    │   │                            was deleted (owner)
    │   └── ConditionError           [core.sweep.errors] a trigger condition outside
    │                                tether_trigger.v1 (path, problem, reason code)
    ├── NotFoundError                exit 2: a home, session or file that does not exist
    │   └── UnknownOwnerError        [core.sweep.errors] no such sweep owner (owner)
    ├── StoreError                   the store (tether.db) cannot be opened or used (path)
    │   ├── StoreVersionError        exit 2: a database from a newer tether (its version, ours)
    │   └── StoreConnectionLostError the database server's connection was lost or refused
    │                                mid-operation; running the operation again is for its
    │                                caller to judge (path)
    ├── DiskFullError                the disk (or quota) holding a file is full; what was being
    │                                written was not half-written (path)
    ├── HomeLockedError              exit 2: another ``tether serve`` holds the home's lock; this
    │                                one started nothing (home, lock file, holder's pid)
    ├── SessionError                 a session directory that cannot be opened as it is
    │   ├── CorruptLogError          a malformed record in the middle of a log (file, line)
    │   ├── MissingCarryError        epoch n > 0 whose previous log has no EpochEnd
    │   ├── BaselineMismatchError    a baseline file whose hash differs from SessionStart
    │   └── ImportResumeError        an interrupted import whose session has moved on
    ├── ImportLedgerError            an imports/<sha256>.jsonl line we cannot read (file, line)
    ├── CheckpointError              banked pre-compaction windows under corpus/
    │   └── CorruptLedgerError       a <session>.ledger.json we cannot read (file, problem)
    ├── LlmError                     anything between us and the inference server
    │   ├── ContextFullError         the prompt does not fit the slot (n_prompt_tokens, n_ctx)
    │   ├── LlmUnreachableError      connection refused, DNS, reset
    │   ├── LlmTimeoutError          no reply within [llm] timeout_s
    │   ├── LlmProtocolError         a reply we cannot read (HTTP status, body excerpt)
    │   ├── EmbeddedModelError       the in-process model cannot be loaded or run (path)
    │   └── EmbedderError            [llm.embedder] the sentence-embedding model cannot be
    │                                loaded or run (model file, problem)
    ├── TurnFailedError              [agent.outcomes] a turn ended without an answer; its TurnError
    │                                is in the log (session, kind, the LlmError as cause)
    ├── CompactionFailedError        [agent.compaction] neither the model's summary nor the
    │                                fallback could be made; the epoch is intact (session, epoch)
    ├── ExtractionError              [core.learning.extraction] the model's reply is not a candidate
    │                                page at all: not JSON, not an object (reason, excerpt)
    ├── BudgetRefusedError           [agent.budget] a model call [budget] refused; nothing was
    │                                sent (kind, reason code, bound, local day)
    ├── LedgerError                  [scheduler.ledger] a jobs/runs.jsonl line we cannot read
    │                                (file, line, problem)
    ├── DemoStepError                [demo.steps] a ``tether demo`` step did not do what
    │                                it claims (step, problem)
    ├── DaemonProtocolError          [daemon.replies] a daemon reply the CLI cannot read: not
    │                                JSON, a field missing or mistyped (socket, status, problem)
    └── SweepError                   [core.sweep.errors] the daily sweep stopped for an owner;
        │                            what was committed stays, nothing half-written (reason code)
        ├── SweepFencedError         a transaction re-read a deletion marker, generation,
        │                            namespace, claim or cursor that moved (owner, reason code)
        ├── TimezoneChangedError     the owner's zone changed under a completed cursor (owner,
        │                            both zones)
        └── PacketError              a sweep packet outside its bounds (reason code)

Every error carries the context a user needs to act on it (file, line, key, slot) as
attributes, and its message says the same in words. ``runbook`` names an entry of
``docs/runbook.md`` when there is one.
"""

from __future__ import annotations

from pathlib import Path


class TetherError(Exception):
    """Root of every error tether raises on purpose."""

    exit_code: int = 1
    runbook: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        if self.runbook:
            return f"{self.message} (runbook: {self.runbook})"
        return self.message


class BadInputError(TetherError):
    """The user gave us something we cannot use; nothing was changed."""

    exit_code = 2


class ConfigError(BadInputError):
    """A config file is unreadable, malformed, or holds an unknown key or a bad value."""

    def __init__(self, path: Path | str, key: str | None, problem: str) -> None:
        where = f"{path}: {key}" if key else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path = Path(path)
        self.key = key
        self.problem = problem


class InvalidIdError(BadInputError):
    """An identifier outside its grammar (session ids are [a-z0-9-]{1,64})."""

    def __init__(self, kind: str, value: str, grammar: str) -> None:
        super().__init__(f"invalid {kind} {value!r}: expected {grammar}")
        self.kind = kind
        self.value = value


class ScanFileError(BadInputError):
    """A line of one of the home's scan files that cannot be used (file, line, problem).

    Refused rather than skipped: a skipped line would silently change what is redacted
    or kept out.
    """

    def __init__(self, source: Path | str, line: int, problem: str) -> None:
        super().__init__(f"{source}:{line}: {problem}")
        self.source = str(source)
        self.line = line
        self.problem = problem


class AllowListError(ScanFileError):
    """A line of a scan allow-list (``.tether-scan-allow``) that is not a fingerprint: a
    typo would otherwise keep a reviewed false positive redacted with no hint why."""


class BlocklistError(ScanFileError):
    """A line of the owner's blocklist (``.tether-scan-blocklist``) that cannot be used:
    a term the owner meant to keep out would otherwise get out."""


class SecretInInputError(BadInputError):
    """Text meant for durable memory (an identity entry, a note, a page) holds a secret.

    Refused, not redacted behind the owner's back: nothing was written, and the message
    says where (``what``, ``line``), which rule matched and the fingerprint to allow it
    with, never the secret itself.
    """

    runbook = "secret-refused"

    def __init__(
        self, what: str, *, line: int, rule: str, fingerprint: str, found: int, allow_file: str
    ) -> None:
        more = f" (and {found - 1} more)" if found > 1 else ""
        super().__init__(
            f"{what}, line {line}: holds a secret{more} (rule {rule}, fingerprint "
            f"{fingerprint}); nothing was written. Leave it out, pass --redact to store it as "
            f"[REDACTED:{rule}], or, if it is no secret, add the fingerprint to {allow_file}"
        )
        self.what = what
        self.line = line
        self.rule = rule
        self.fingerprint = fingerprint
        self.found = found


class SettingsFileError(BadInputError):
    """A harness's file (``.claude/settings.json``, ``.mcp.json``, ``~/.claude.json``,
    Codex's ``hooks.json`` or ``config.toml``) that is not valid JSON or TOML or not the
    shape the harness reads, or that holds a ``tether`` entry tether did not write. The
    message names the file and the line or key; no file was written."""

    runbook = "settings-file-refused"


class ManagedBlockError(BadInputError):
    """A file's tether-managed block (``compile-context --target codex``) cannot be found
    unambiguously: a marker without its pair, two blocks, or the end before the begin.
    The file is left as it is."""

    runbook = "view-block-malformed"

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}; the file was not changed")
        self.path = path
        self.line = line
        self.problem = problem


class ImportFormatError(BadInputError):
    """A line of an import file is malformed; nothing was imported."""

    def __init__(self, path: Path | str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = Path(path)
        self.line = line
        self.problem = problem


class UnsafeHomePathError(BadInputError):
    """A file of the home is a symbolic link (or a FIFO, a device): tether refuses to read
    or write through it, so a link cannot pull another file into identity or send an
    append elsewhere (issue 34)."""

    runbook = "home-unsafe-path"

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(
            f"{path}: {what}; tether does not follow links or read special files inside "
            "its home (replace it with a regular file)"
        )
        self.path = Path(path)
        self.what = what


class ExtraMissingError(BadInputError):
    """A feature needs an optional extra (``pip install tether[NAME]``) that is not installed."""

    def __init__(self, extra: str, feature: str, missing: str, how: str) -> None:
        super().__init__(f"{feature} needs the extra tether[{extra}] ({missing} is missing): {how}")
        self.extra = extra
        self.feature = feature
        self.missing = missing
        self.how = how


class NotFoundError(TetherError):
    """A home, session or file that does not exist."""

    exit_code = 2


class StoreError(TetherError):
    """The store cannot be opened or used: not a database, unwritable, locked too long."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


class StoreVersionError(StoreError):
    """The database was migrated by a newer tether; this one refuses to touch it."""

    exit_code = 2  # the owner must upgrade tether: nothing was changed

    def __init__(self, path: Path | str, found: int, known: int) -> None:
        super().__init__(
            path,
            f"schema version {found} is newer than this tether knows ({known}); "
            "upgrade tether (the database was not changed)",
        )
        self.found = found
        self.known = known


class StoreConnectionLostError(StoreError):
    """The connection to the database server was lost (terminated, reset, the server
    restarting) or could not be had; whether a commit landed is in ``problem``. The
    sweep worker runs the owner-day again: every step of it is fenced or idempotent."""


class SessionError(TetherError):
    """A session directory that cannot be opened as it stands; nothing was rewritten."""


class CorruptLogError(SessionError):
    """A malformed record that is not a torn last line."""

    runbook = "session-log-corrupt"

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: malformed record: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class MissingCarryError(SessionError):
    """Epoch n > 0 exists but epoch n-1's log does not end the epoch with EpochEnd."""

    runbook = "session-missing-carry"

    def __init__(self, path: Path, epoch: int) -> None:
        super().__init__(f"{path}: epoch {epoch} exists but this log has no EpochEnd to carry from")
        self.path = path
        self.epoch = epoch


class BaselineMismatchError(SessionError):
    """The baseline file's bytes do not hash to what the epoch's SessionStart recorded."""

    runbook = "session-baseline-changed"

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(
            f"{path}: baseline hash {actual} differs from SessionStart's {expected}; "
            "the baseline file was changed after the epoch started"
        )
        self.path = path
        self.expected = expected
        self.actual = actual


class CheckpointError(TetherError):
    """Banked pre-compaction windows (``corpus/``) that cannot be read or written as asked."""


class CorruptLedgerError(CheckpointError):
    """A session's coverage ledger that is not the JSON document we write; left untouched."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: unreadable coverage ledger: {problem}")
        self.path = path
        self.problem = problem


class LlmError(TetherError):
    """Anything between tether and the inference server."""


class ContextFullError(LlmError):
    """The server refused the prompt as larger than the slot's context."""

    def __init__(self, n_prompt_tokens: int, n_ctx: int, slot: int | None = None) -> None:
        where = f" on slot {slot}" if slot is not None else ""
        super().__init__(
            f"prompt of {n_prompt_tokens} tokens exceeds the context of {n_ctx} tokens{where}"
        )
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx
        self.slot = slot


class LlmUnreachableError(LlmError):
    """The server could not be reached (refused, reset, name lookup)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"inference server {url} unreachable: {reason}")
        self.url = url
        self.reason = reason


class LlmTimeoutError(LlmError):
    """The server did not answer within [llm] timeout_s."""

    def __init__(self, url: str, timeout_s: float) -> None:
        super().__init__(f"inference server {url} did not answer within {timeout_s:g} s")
        self.url = url
        self.timeout_s = timeout_s


class LlmProtocolError(LlmError):
    """The server answered with something we cannot read."""

    def __init__(self, url: str, status: int, problem: str) -> None:
        super().__init__(f"inference server {url} answered HTTP {status}: {problem}")
        self.url = url
        self.status = status
        self.problem = problem


class EmbeddedModelError(LlmError):
    """The in-process model (``[llm] backend = "embedded"``) cannot be loaded or run."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"embedded model {path}: {problem}")
        self.path = Path(path)
        self.problem = problem


class ImportChangedError(ImportFormatError):
    """A line read by an import's write pass is not what its check pass read: the file
    was rewritten in place during the import."""


class ImportResumeError(SessionError):
    """An interrupted import cannot be finished safely (a session it wrote to changed)."""


class ImportLedgerError(TetherError):
    """A line of an import ledger that is not an entry (and not a torn last line)."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: malformed import ledger entry: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class DiskFullError(TetherError):
    """The file system holding ``path`` has no room left (ENOSPC, EDQUOT, SQLite's
    SQLITE_FULL, or its "disk I/O error" on a full disk). Exit 1: the environment failed,
    not the input. What was being written was rolled back or cut back to where it was."""

    runbook = "disk-full"

    def __init__(self, path: Path | str, doing: str | None = None) -> None:
        what = f" ({doing})" if doing else ""
        super().__init__(
            f"disk full: {path}{what}; nothing was half-written: free some space and run it again"
        )
        self.path = Path(path)
        self.doing = doing


class HomeLockedError(TetherError):
    """Another ``tether serve`` holds the home's lock; this one started nothing."""

    exit_code = 2
    runbook = "serve-home-locked"

    def __init__(self, home: Path, lock: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "pid not written yet"
        super().__init__(
            f"a tether daemon is already serving {home} ({holder}, holding {lock}); "
            "stop it first, or give this daemon another --home"
        )
        self.home = home
        self.lock = lock
        self.pid = pid
