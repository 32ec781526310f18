"""A secret the user gives tether in the wrong place is never echoed back in clear: usage
errors, bad ids, bad values and config excerpts all go through the redactor. Free text
that starts with '-' (a pasted PEM key, a list item) is taken as text, not as an option.
Real child processes, real homes."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon_helpers import tether
from tether.memory.identity import MEMORY_FILE

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
PEM_BODY = "MIIEpAIBAAKCAQEA1x2y3z4abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert GITHUB not in text
        assert PEM_BODY not in text


def test_a_pasted_private_key_is_text_and_refused_without_being_echoed(home: Path) -> None:
    before = (home / MEMORY_FILE).read_text()
    out = tether(home, "memory", "add", PEM)
    assert out.returncode == 2
    _no_secret(out.stdout, out.stderr)
    assert "pem-private-key" in out.stderr
    assert "No such option" not in out.stderr  # taken as the entry's text, then screened
    assert (home / MEMORY_FILE).read_text() == before


def test_a_pasted_key_is_stored_redacted_when_asked(home: Path) -> None:
    out = tether(home, "memory", "add", "--redact", PEM)
    assert out.returncode == 0, out.stderr
    _no_secret(out.stdout, out.stderr, (home / MEMORY_FILE).read_text())
    assert "[REDACTED:pem-private-key]" in (home / MEMORY_FILE).read_text()


def test_a_bad_session_id_holding_a_token_is_named_redacted(home: Path) -> None:
    out = tether(home, "chat", "--session", GITHUB, "hi")
    assert out.returncode == 2
    _no_secret(out.stdout, out.stderr)
    assert "invalid session id '[REDACTED:github-token]'" in out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("sweep", "run", PEM),  # a command without free text: an unknown option
        ("memory", "recall", "-k", GITHUB, "tea"),  # a bad option value
        ("session", "show", GITHUB),  # a bad id
        ("--hmoe", GITHUB),  # the top level's own usage error
    ],
)
def test_usage_errors_never_quote_a_secret(home: Path, args: tuple[str, ...]) -> None:
    out = tether(home, *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("tether: error: ")
    assert len(out.stderr.strip().splitlines()) == 1  # one line, no traceback
    _no_secret(out.stdout, out.stderr)


def test_a_config_value_holding_a_token_is_named_redacted(home: Path) -> None:
    toml = home / "tether.toml"
    toml.write_text(toml.read_text().replace("every_s = 0", f'every_s = "{GITHUB}"', 1))
    assert GITHUB in toml.read_text()
    out = tether(home, "config", "check")
    assert out.returncode == 2
    assert "heartbeat.every_s" in out.stderr
    _no_secret(out.stdout, out.stderr)


def test_free_text_that_starts_with_a_dash_is_text(home: Path) -> None:
    out = tether(home, "memory", "note", "- buy more oolong, the 2025 harvest")
    assert out.returncode == 0, out.stderr
    listed = tether(home, "memory", "show").stdout
    assert "- buy more oolong, the 2025 harvest" in listed


def test_a_dashed_word_says_to_use_the_separator_and_works_with_it(home: Path) -> None:
    refused = tether(home, "memory", "recall", "-oolong")
    assert refused.returncode == 2
    assert "put -- before it" in refused.stderr
    taken = tether(home, "memory", "recall", "--", "-oolong")
    assert taken.returncode == 0, taken.stderr


def test_a_mistyped_option_is_still_an_error_not_text(home: Path) -> None:
    before = (home / MEMORY_FILE).read_text()
    out = tether(home, "memory", "add", "--redcat", "green tea")
    assert out.returncode == 2
    assert "Did you mean '--redact'" in out.stderr
    assert (home / MEMORY_FILE).read_text() == before


def test_an_options_value_stays_with_its_option(home: Path) -> None:
    """A value with a leading dash and a space belongs to the option before it."""
    out = tether(home, "chat", "--session", "- x", "hi")
    assert out.returncode == 2
    assert "invalid session id '- x'" in out.stderr
