"""Claude Code transcripts with compaction boundaries, in the real format (compact JSON,
``userType: external``, a ``compact_boundary`` system record followed by the
``isCompactSummary`` user record), and hook payloads as Claude Code sends them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon_helpers import tether

SESSION = "4f1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e6f"
TETHER_SESSION = f"cc-{SESSION}"
SECRET = "sk-ant-api03-" + "Q" * 93 + "AA"


class Transcript:
    def __init__(self, path: Path, session: str = SESSION) -> None:
        self.path = path
        self.session = session
        self.n = 0
        path.write_bytes(b"")

    def _add(self, record: dict[str, Any]) -> str:
        self.n += 1
        uid = f"00000000-0000-4000-8000-{self.n:012d}"
        base = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work/project",
            "sessionId": self.session,
            "version": "2.0.14",
            "uuid": uid,
            "timestamp": f"2026-11-01T10:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**base, **record}, separators=(",", ":")) + "\n")
        return uid

    def user(self, text: str) -> str:
        return self._add({"type": "user", "message": {"role": "user", "content": text}})

    def assistant(self, text: str) -> str:
        return self._add(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{self.n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": text}],
                },
            }
        )

    def tool_result(self, content: str = "file listing") -> str:
        block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
        return self._add({"type": "user", "message": {"role": "user", "content": [block]}})

    def planted(self, n: int, mib: float, talk: int = 0) -> list[str]:
        """``n`` facts, one a user turn, spread over ``mib`` MiB of mostly tool output (and
        ``talk`` characters of assistant words a turn); the facts, in order."""
        facts = [f"PLANTED-FACT-{self.n:05d}-{i:03d}" for i in range(n)]
        output = "drwxr-xr-x 2 owner owner 4096 Nov 1 10:00 build-artifacts-directory\n" * 900
        per = max(1, int(mib * 1024 * 1024 / n / len(output)))
        for fact in facts:
            self.user(f"Remember {fact}: we keep it.")
            for _ in range(per):
                self.tool_result(output)
            self.assistant(f"Kept {fact}. " + "words " * (talk // 6))
        return facts

    def boundary(self, trigger: str = "auto", summary: str = "SUMMARY-OF-THE-HARNESS") -> None:
        self._add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "logicalParentUuid": "x",
                "compactMetadata": {"trigger": trigger, "preTokens": 150000},
            }
        )
        self._add(
            {
                "type": "user",
                "isCompactSummary": True,
                "isVisibleInTranscriptOnly": True,
                "message": {"role": "user", "content": summary},
            }
        )


def payload(event: str, transcript: Path | None, session: str = SESSION, **extra: object) -> str:
    doc: dict[str, Any] = {
        "session_id": session,
        "cwd": "/work/project",
        "hook_event_name": event,
        **extra,
    }
    if transcript is not None:
        doc["transcript_path"] = str(transcript)
    return json.dumps(doc)


def hook(home: Path, event: str, stdin: str, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """``tether hook claude-code EVENT`` in a child process, the payload on stdin."""
    return tether(home, "hook", "claude-code", event, *args, input=stdin, env=env)


def heartbeat(home: Path) -> list[dict[str, Any]]:
    path = home / "telemetry" / "heartbeat.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def segments(home: Path) -> list[Path]:
    return sorted((home / "corpus").glob("*.seg-*.txt"))


def ledger_doc(home: Path, session: str = TETHER_SESSION) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((home / "corpus" / f"{session}.ledger.json").read_text())
    return doc
