"""Standing-trigger conditions: the strict, versioned ``tether_trigger.v1`` schema.

A condition is JSON::

    {"schema": "tether_trigger.v1", "when": NODE}
    NODE = {"op": "all" | "any", "of": [NODE, ...]}        1..8 children
         | {"op": "not", "of": [NODE]}
         | {"op": "time_of_day", "after": "HH:MM", "before": "HH:MM"}
         | {"op": "weekday", "days": ["mon", ...]}
         | {"op": "keyword", "words": ["...", ...]}         1..8 words of <= 40 chars
         | {"op": "folder", "name": "..."}                  a session folder

Compiling is two steps. First a recursive validator walks the raw value and rejects, at
every depth, anything that smells of a payload: ``bytes``-like objects, keys such as
``raw``/``image``/``base64``/``bytes``/``data``, ``data:`` URIs and long base64-looking
strings. Then the value is converted strictly (unknown keys are errors) and re-encoded
canonically (sorted keys), so the same condition always stores the same text.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from tether.core.sweep.errors import ConditionError

SCHEMA = "tether_trigger.v1"
MAX_DEPTH = 6
MAX_NODES = 48

FORBIDDEN_KEYS = frozenset(
    {"raw", "image", "images", "base64", "b64", "bytes", "data", "blob", "pixels", "payload"}
)
_BASE64ISH = re.compile(r"[A-Za-z0-9+/_-]{48,}={0,2}")
_DATA_URI = re.compile(r"^\s*data:", re.IGNORECASE)

Word = Annotated[str, msgspec.Meta(min_length=1, max_length=40, pattern=r"^[^\x00-\x1f]*$")]
HourMinute = Annotated[str, msgspec.Meta(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


class _Node(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="op"):
    pass


class AllOf(_Node, frozen=True, tag="all"):
    of: Annotated[tuple[Node, ...], msgspec.Meta(min_length=1, max_length=8)]


class AnyOf(_Node, frozen=True, tag="any"):
    of: Annotated[tuple[Node, ...], msgspec.Meta(min_length=1, max_length=8)]


class Not(_Node, frozen=True, tag="not"):
    of: Annotated[tuple[Node, ...], msgspec.Meta(min_length=1, max_length=1)]


class TimeOfDay(_Node, frozen=True, tag="time_of_day"):
    after: HourMinute
    before: HourMinute


class Weekday(_Node, frozen=True, tag="weekday"):
    days: Annotated[tuple[Day, ...], msgspec.Meta(min_length=1, max_length=7)]


class Keyword(_Node, frozen=True, tag="keyword"):
    words: Annotated[tuple[Word, ...], msgspec.Meta(min_length=1, max_length=8)]


class Folder(_Node, frozen=True, tag="folder"):
    name: Word


Node = AllOf | AnyOf | Not | TimeOfDay | Weekday | Keyword | Folder


class Condition(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: Literal["tether_trigger.v1"]
    when: Node


def reject_payloads(value: object, path: str = "$", depth: int = 0) -> None:
    """Raise ConditionError(reason="forbidden_payload") if ``value`` carries raw, image,
    base64 or bytes content at any depth; also bound the depth."""
    if depth > MAX_DEPTH * 2 + 2:
        raise ConditionError(path, "nested too deeply")
    if isinstance(value, bytes | bytearray | memoryview):
        raise ConditionError(path, "bytes are not allowed", "forbidden_payload")
    if isinstance(value, str):
        if _DATA_URI.match(value) or _BASE64ISH.search(value):
            raise ConditionError(path, "looks like an encoded payload", "forbidden_payload")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConditionError(path, "keys must be strings")
            if key.lower() in FORBIDDEN_KEYS:
                raise ConditionError(
                    f"{path}.{key}", "payload key not allowed", "forbidden_payload"
                )
            reject_payloads(key, f"{path}.{key}", depth + 1)
            reject_payloads(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            reject_payloads(item, f"{path}[{i}]", depth + 1)
        return
    if value is None or isinstance(value, bool | int | float):
        return
    raise ConditionError(
        path, f"unsupported value of type {type(value).__name__}", "forbidden_payload"
    )


def _measure(node: Node, depth: int = 1) -> tuple[int, int]:
    """(depth, node count) of a compiled tree."""
    if isinstance(node, AllOf | AnyOf | Not):
        sizes = [_measure(child, depth + 1) for child in node.of]
        return max(d for d, _ in sizes), 1 + sum(n for _, n in sizes)
    return depth, 1


def compile_condition(raw: Any) -> Condition:
    """Validate ``raw`` (decoded JSON or Python values) into a Condition, or raise."""
    reject_payloads(raw)
    try:
        condition = msgspec.convert(raw, Condition)
    except msgspec.ValidationError as exc:
        raise ConditionError("$", str(exc)) from None
    depth, nodes = _measure(condition.when)
    if depth > MAX_DEPTH or nodes > MAX_NODES:
        raise ConditionError("$.when", f"more than {MAX_DEPTH} levels or {MAX_NODES} nodes")
    return condition


def canonical(condition: Condition) -> str:
    """The stored text of a condition: sorted keys, no spaces."""
    return msgspec.json.encode(msgspec.to_builtins(condition), order="sorted").decode()


def compile_text(raw: Any) -> str:
    return canonical(compile_condition(raw))
