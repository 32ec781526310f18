"""A table of tether's in someone else's TOML file, added and removed as text, pure.

Codex keeps its MCP servers in ``config.toml`` (``[mcp_servers.<name>]``), a file its owner
edits by hand, with comments. Re-serialising it through a TOML library loses or moves
them; so tether never re-writes the file: it appends one block between two marker
comments and, to uninstall, cuts exactly that block (and the blank line it added before
it) out again::

    # >>> tether: its MCP server (`tether setup codex --uninstall` removes this block)
    [mcp_servers.tether]
    command = "/usr/local/bin/tether"
    args = ["--home", "/home/me/my memory", "mcp"]
    # <<< tether

Every edit is checked by parsing the result (stdlib ``tomllib``): the new document must
be the old one plus (or minus) that one table, nothing else. A file that does not parse,
a ``[mcp_servers.tether]`` tether did not write, or an ``mcp_servers`` written in a form a
table header cannot extend (an inline table) is refused with ``BlockError``, naming the
line where ``tomllib`` gives one: the caller leaves the file untouched.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from typing import Any

BEGIN = "# >>> tether: its MCP server (`tether setup codex --uninstall` removes this block)"
END = "# <<< tether"
_BLOCK = re.compile(r"^# >>> tether:[^\n]*\n.*?^# <<< tether[^\n]*(?:\n|\Z)", re.M | re.S)


class BlockError(ValueError):
    """The edit cannot be made safely (the message says why, and where)."""


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's; DEL must be escaped
    too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def server_block(table: str, command: str, args: Sequence[str]) -> str:
    """The marked block defining ``[table]`` with ``command`` and ``args``."""
    items = ", ".join(toml_string(a) for a in args)
    return f"{BEGIN}\n[{table}]\ncommand = {toml_string(command)}\nargs = [{items}]\n{END}\n"


def parse(text: str) -> dict[str, Any]:
    """The document, or BlockError with ``tomllib``'s message (it names line and column)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BlockError(f"not valid TOML ({exc})") from None


def _lookup(doc: dict[str, Any], dotted: Sequence[str]) -> Any:
    node: Any = doc
    for key in dotted:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _without(doc: dict[str, Any], dotted: Sequence[str]) -> dict[str, Any]:
    """``doc`` without the table at ``dotted``, and without parents left empty by it."""
    head, *rest = dotted
    out = dict(doc)
    if not rest:
        out.pop(head, None)
        return out
    child = out.get(head)
    if isinstance(child, dict):
        inner = _without(child, rest)
        if inner:
            out[head] = inner
        else:
            out.pop(head)
    return out


def find_block(text: str) -> tuple[int, int] | None:
    """(start, end) of tether's block in ``text``, or None."""
    m = _BLOCK.search(text)
    return (m.start(), m.end()) if m else None


def add_block(text: str, table: str, block: str) -> str:
    """``text`` with ``block`` (defining ``[table]``, dotted) in it: replaced where the
    markers are, else appended after a blank line. Unchanged when it is already there."""
    dotted = table.split(".")
    before = parse(text)
    found = find_block(text)
    if found is not None:
        start, end = found
        if text[start:end].rstrip("\n") == block.rstrip("\n"):
            return text
        base = text[:start] + text[end:]
        new = text[:start] + block + text[end:]
        expected_base = parse(base)
    else:
        if _lookup(before, dotted) is not None:
            raise BlockError(f"[{table}] is already defined, not by tether: remove or rename it")
        parent = _lookup(before, dotted[:-1]) if len(dotted) > 1 else before
        if parent is not None and not isinstance(parent, dict):
            raise BlockError(f"{'.'.join(dotted[:-1])} is not a table")
        sep = "" if not text.strip() else ("\n" if text.endswith("\n") else "\n\n")
        new = ("" if not text.strip() else text) + sep + block
        expected_base = before
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        raise BlockError(
            f"{'.'.join(dotted[:-1]) or table} is written in a form a [{table}] table cannot "
            "extend (an inline table?)"
        ) from None
    if _without(after, dotted) != expected_base or _lookup(after, dotted) is None:
        raise BlockError(f"adding [{table}] would change more than that table")
    return new


def remove_block(text: str, table: str) -> str:
    """``text`` without tether's block (and the blank line added before it); unchanged
    when there is none."""
    found = find_block(text)
    if found is None:
        return text
    start, end = found
    head, tail = text[:start], text[end:]
    if head.endswith("\n\n") or (head == "\n"):
        head = head[:-1]
    new = head + tail
    before = parse(text)
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        raise BlockError("the file would not parse without tether's block") from None
    if after != _without(before, table.split(".")):
        raise BlockError(f"removing tether's block would change more than [{table}]")
    return new
