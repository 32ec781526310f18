"""The secret scanner stays bounded on hostile input and loses nothing to its chunks.

The text is searched in chunks with an overlap (``tether.scan.secrets``); these tests cut
texts at every place a chunk boundary could fall and check that the result is exactly the
unchunked one, and that tokens longer than a rule's cap are still redacted whole.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_scan import FRAGMENTS, SECRETS, TRUE_POSITIVES, prose
from tether.scan import redact, redact_bytes
from tether.scan.secrets import CHUNK, LONGEST_MATCH, OVERLAP, _hits, redact_many

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
PEM_BEGIN = "-----BEGIN " + "RSA PRIVATE KEY-----\n"
PEM_END = "-----END " + "RSA PRIVATE KEY-----"


def chunked(text: str, chunk: int) -> list[tuple[int, int, int]]:
    return sorted(_hits(text.encode(), frozenset(), chunk=chunk)[0])


def whole(text: str) -> list[tuple[int, int, int]]:
    data = text.encode()
    return sorted(_hits(data, frozenset(), chunk=len(data) + 1)[0])


def test_the_overlap_holds_the_longest_match() -> None:
    assert OVERLAP >= LONGEST_MATCH
    assert CHUNK >= OVERLAP


@pytest.mark.parametrize(("rule", "text", "secret"), TRUE_POSITIVES)
def test_a_secret_across_any_chunk_boundary_is_found(rule: str, text: str, secret: str) -> None:
    framed = "lead in. " + text + " trailing words"
    expected = whole(framed)
    assert expected
    for chunk in range(1, len(framed.encode()) + 2):
        assert chunked(framed, chunk) == expected, chunk


@pytest.mark.parametrize("cut", [1, 7, len(GH) // 2, len(GH) - 1])
def test_a_secret_across_the_real_chunk_boundary_is_redacted(cut: int) -> None:
    # The real sizes: ordinary text up to the boundary, the token straddling it.
    text = "x" * (CHUNK - cut) + " " + GH + " and " + AWS + " after"
    out = redact(text)
    assert GH not in out.text
    assert AWS not in out.text
    assert out.counts == {"aws-access-key": 1, "github-token": 1}


texts = st.lists(prose | st.sampled_from(FRAGMENTS + SECRETS), max_size=20).map("".join)


@settings(max_examples=300)
@given(texts, st.integers(min_value=1, max_value=64))
def test_chunked_scan_is_the_unchunked_scan(text: str, chunk: int) -> None:
    assert chunked(text, chunk) == whole(text)


@settings(max_examples=100)
@given(st.lists(texts, max_size=6), st.integers(min_value=1, max_value=64))
def test_redact_many_is_unchanged_by_chunks(rows: list[str], chunk: int) -> None:
    assert redact_many(rows) == [redact(r).text for r in rows]


@pytest.mark.parametrize(
    ("secret", "rule"),
    [
        ("ghp_" + "Ab1" * 2000, "github-token"),
        ("AKIA" + "B2" * 3000, "aws-access-key"),
        ("sk-" + "Ab3_cD4-eF5g" * 500, "openai-key"),
        ("eyJ" + "hbGciOi" * 2000 + ".eyJ" + "zdWIi" * 3000 + "." + "Sfl_K-x" * 2000, "jwt"),
    ],
)
def test_a_token_past_its_rule_cap_is_redacted_whole(secret: str, rule: str) -> None:
    out = redact(f"before {secret} after")
    assert out.text == f"before [REDACTED:{rule}] after"


def test_a_private_key_with_its_end_past_the_cap_is_still_redacted() -> None:
    body = ("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2KvUwZ4kXbY9uJ0p8fQ1+aBcDeF\n") * 400
    out = redact("key:\n" + PEM_BEGIN + body + PEM_END + "\nnext")
    assert out.text == "key:\n[REDACTED:pem-private-key]"


def test_hostile_inputs_redact_what_they_hold() -> None:
    # Many BEGIN lines with no END: every line is an unclosed block, all redacted.
    begins = PEM_BEGIN * 20_000
    assert redact(begins).text == "[REDACTED:pem-private-key]" * 20_000
    # Near-misses: nothing to redact, nothing changed.
    near = ("ghp_" + "A" * 35 + " sk-" + "a" * 19 + " " + "xoxb-short ") * 5_000
    assert redact_bytes(near.encode()).data == near.encode()
    # Assignments to secret-looking keys, none with a quoted value.
    assigns = "password = token: secret := api_key => " * 5_000
    assert redact(assigns).text == assigns
