from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from tether.records import LogRecord, ToolResult, is_utc

decoder = msgspec.json.Decoder(LogRecord)


def test_round_trip_keeps_class_field_name() -> None:
    rec = ToolResult(
        time=datetime(2026, 1, 1, tzinfo=UTC),
        tool_call_id="c1",
        content="body",
        class_="web",
        untrusted=True,
    )
    raw = msgspec.json.encode(rec)
    assert b'"class":"web"' in raw
    assert b'"type":"ToolResult"' in raw
    assert decoder.decode(raw) == rec


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b'{"type":"User","time":"2026-01-01T00:00:00Z","text":"hi","extra":1}', "unknown field"),
        (b'{"type":"User","time":"2026-01-01T00:00:00Z","text":3}', "Expected `str`"),
        (b'{"type":"User","time":"2026-01-01T00:00:00","text":"hi"}', "timezone"),
        (b'{"type":"Telepathy","time":"2026-01-01T00:00:00Z"}', "Invalid value"),
        (b'{"type":"User","text":"hi"}', "missing required field `time`"),
        (
            b'{"type":"Usage","time":"2026-01-01T00:00:00Z","cache_n":-1,'
            b'"prompt_n":1,"predicted_n":1}',
            ">= 0",
        ),
        (b'{"type":"TurnError","time":"2026-01-01T00:00:00Z","kind":"oops"}', "Invalid enum"),
    ],
)
def test_strict_decode_rejects(line: bytes, needle: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=needle):
        decoder.decode(line)


def test_is_utc() -> None:
    assert is_utc(datetime(2026, 1, 1, tzinfo=UTC))
    assert is_utc(datetime(2026, 1, 1, tzinfo=timezone(timedelta(0))))
    assert not is_utc(datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2))))
