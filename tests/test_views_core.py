"""Compiled views, the pure part: selection, packing, the managed block, and the scan of
what may not leave the home."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.context import tokens
from tether.core.views import compiled as views
from tether.errors import BlocklistError, ManagedBlockError
from tether.records import Page
from tether.scan.secrets import fingerprint
from tether.scan.sensitive import Blocklist, first_sensitive, parse_blocklist

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def page(
    slug: str,
    *,
    days_old: float = 0,
    body: str = "some words about it",
    tags: tuple[str, ...] = (),
    visibility: str = "world",
    untrusted: bool = False,
    title: str | None = None,
) -> Page:
    return Page(
        slug=slug,
        title=title or slug,
        body=body,
        tags=tags,
        visibility="world" if visibility == "world" else "private",
        untrusted=untrusted,
        updated_at=T0 - timedelta(days=days_old),
    )


_SLUGS = st.sampled_from(
    ["people/ada", "people/bo", "concepts/x", "companies/acme", "originals/y", "notes/a",
     "notes/b", "trip-2027", "work/deploy", "corpus/s.seg-1"]
)  # fmt: skip
_PAGES = st.lists(
    st.builds(
        page,
        _SLUGS,
        days_old=st.floats(0, 120, allow_nan=False),
        body=st.text(max_size=900),
        tags=st.sampled_from([(), ("compile-context",), ("x",)]),
        visibility=st.sampled_from(["world", "private"]),
        untrusted=st.booleans(),
    ),
    max_size=12,
    unique_by=lambda p: p.slug,
)


def compiled(pages: list[Page], budget: int = 3000) -> views.Packed[object]:
    return views.pack(views.select(pages), "claude-code", budget)


@given(_PAGES, st.randoms())
def test_the_same_pages_give_the_same_bytes_in_any_order(
    pages: list[Page], rnd: random.Random
) -> None:
    shuffled = list(pages)
    rnd.shuffle(shuffled)
    assert compiled(shuffled).text == compiled(pages).text


@given(_PAGES, st.floats(-5000, 5000, allow_nan=False))
def test_no_clock_is_read_moving_every_page_in_time_changes_nothing(
    pages: list[Page], shift_days: float
) -> None:
    moved = [msgspec.structs.replace(p, updated_at=p.updated_at + timedelta(days=shift_days))
             for p in pages]  # fmt: skip
    assert compiled(moved).text == compiled(pages).text


@settings(max_examples=200)
@given(_PAGES, st.integers(1, 2000))
def test_the_whole_file_fits_the_budget_unless_not_even_the_header_does(
    pages: list[Page], budget: int
) -> None:
    packed = compiled(pages, budget)
    head = views.header("claude-code")
    if packed.tokens > budget:  # only the honest empty files: the header and one line
        assert packed.included == ()
        assert packed.text in {head + views.NO_PAGES, head + views.no_fit(budget)}
    assert packed.tokens == tokens.count(packed.text)


@given(_PAGES)
def test_private_untrusted_and_corpus_pages_never_leave_the_home(pages: list[Page]) -> None:
    packed = compiled(pages)
    by_slug = {p.slug: p for p in pages}
    for slug in packed.included:
        p = by_slug[slug]
        assert (p.visibility, p.untrusted, slug.startswith("corpus/")) == ("world", False, False)
    for p in pages:
        if views.leaves_home(p) is not None:
            assert f"(tether://{p.slug})" not in packed.text


@given(_PAGES)
def test_pinned_pages_come_before_every_other(pages: list[Page]) -> None:
    order = [c.arm == "pinned" for c in views.select(pages)]
    assert order == sorted(order, reverse=True)


def test_caps_and_the_recent_window_are_measured_from_the_newest_page() -> None:
    people = [page(f"people/p{i:02d}", days_old=100 + i) for i in range(60)]
    old_note = page("notes/old", days_old=31)
    fresh = page("notes/fresh", days_old=0)
    pinned_old = page("notes/pinned", days_old=400, tags=("compile-context",))
    chosen = views.select([*people, old_note, fresh, pinned_old])
    arms = {c.page.slug: c.arm for c in chosen}
    assert sum(1 for a in arms.values() if a == "durable") == views.PREFIX_CAP
    assert "people/p00" in arms  # the newest 50 of the prefix
    assert "people/p59" not in arms
    assert "notes/old" not in arms  # 31 days behind the newest page
    assert arms["notes/fresh"] == "recent"
    assert chosen[0].page.slug == "notes/pinned"
    # Without the fresh page the newest is 31 days old: the window moves with it.
    assert "notes/old" in {c.page.slug for c in views.select([old_note, *people])}


def test_a_refused_entry_is_skipped_and_only_what_fits_is_scanned() -> None:
    pages = [page(f"notes/n{i}", days_old=i, body=f"note {i} " + "text " * 40) for i in range(40)]
    asked: list[str] = []

    def refuse(entry: str) -> str | None:
        asked.append(entry)
        return "nope" if "note 1 " in entry else None

    packed = views.pack(views.select(pages), "claude-code", 600, refuse)
    assert packed.refused == (("notes/n1", "nope"),)
    assert packed.included[:2] == ("notes/n0", "notes/n2")
    assert len(asked) == len(packed.included) + 1  # nothing past the budget is scanned
    assert packed.over_budget == tuple(f"notes/n{i}" for i in range(len(asked), 31))
    assert packed.tokens <= 600


@settings(max_examples=300)
@given(
    st.text(alphabet=st.sampled_from("ab #\n\t\r\x0b."), max_size=4000),
    st.integers(5, 700),
)
def test_an_excerpt_is_the_whole_body_squeezed_and_cut(body: str, limit: int) -> None:
    text = body.replace("\r\n", "\n")
    assert views.excerpt(body, "no such title", limit) == views.cut(views.squeeze(text), limit)
    assert len(views.excerpt(body, "x", limit)) <= limit


def test_an_excerpt_drops_a_repeated_title_and_is_cut_at_a_word() -> None:
    body = "# Ada\n\n\n\nline   one\n\n\n\n" + "word " * 200
    out = views.excerpt(body, "Ada")
    assert out.startswith("line one\n\nword word")
    assert len(out) <= views.EXCERPT_CHARS
    assert out.endswith("word…")
    assert views.excerpt("# Other\nx", "Ada") == "# Other\nx"
    spaced = "a" + " " * 5000 + "b " * 400  # mostly blanks: the whole body is read
    assert views.excerpt(spaced, "t").startswith("a b b")


# -- the managed block -------------------------------------------------------------------

BLOCK = "generated\n"


def test_the_block_goes_after_the_owners_text_and_replaces_only_itself() -> None:
    assert views.splice(None, BLOCK, "AGENTS.md") == views.managed(BLOCK)
    first = views.splice("# Agents\nUse ruff.", BLOCK, "AGENTS.md")
    assert first == "# Agents\nUse ruff.\n\n" + views.managed(BLOCK)
    edited = first + "\nOwner's line after.\n"
    again = views.splice(edited, "new\n", "AGENTS.md")
    assert again == "# Agents\nUse ruff.\n\n" + views.managed("new\n") + "\nOwner's line after.\n"
    assert views.current_block(again, "AGENTS.md") == views.managed("new\n")


@given(st.text(alphabet=st.characters(exclude_characters="<>")), st.text(), st.text())
def test_splicing_twice_is_splicing_once(owner: str, a: str, b: str) -> None:
    a, b = a.replace("<!--", "") + "\n", b.replace("<!--", "") + "\n"
    once = views.splice(owner, b, "f")
    assert views.splice(views.splice(owner, a, "f"), b, "f") == once
    assert once.startswith(owner)


def test_a_page_quoting_the_markers_cannot_end_the_block() -> None:
    quoting = page("notes/markers", body=f"How it works:\n{views.BLOCK_END}\n<!-- hidden -->")
    packed = compiled([quoting])
    file = views.splice("# Agents\n", packed.text, "AGENTS.md")
    assert views.current_block(file, "AGENTS.md") == views.managed(packed.text)
    assert views.splice(file, packed.text, "AGENTS.md") == file
    assert "&lt;!-- hidden -->" in packed.text


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"x\n{views.BLOCK_BEGIN}\nno end\n", 2),
        (f"{views.BLOCK_END}\nx\n", 1),
        (f"{views.BLOCK_END}\n{views.BLOCK_BEGIN}\n", 1),
        (f"{views.BLOCK_BEGIN}\n{views.BLOCK_END}\n{views.BLOCK_BEGIN}\n{views.BLOCK_END}\n", 3),
    ],
)
def test_malformed_markers_are_refused_naming_the_line(text: str, line: int) -> None:
    with pytest.raises(ManagedBlockError) as err:
        views.splice(text, BLOCK, "AGENTS.md")
    assert err.value.line == line
    assert str(err.value).startswith(f"AGENTS.md:{line}: ")


# -- what may not leave the home ---------------------------------------------------------

NONE = Blocklist()


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("write to ada@example.org", "email"),
        ("call +44 20 7946 0958 after six", "phone"),
        ("or (555) 123-4567", "phone"),
        ("card 4111 1111 1111 1111 exp 12/29", "payment-card"),
        ("ssn 123-45-6789", "us-ssn"),
        ("rent to GB82 WEST 1234 5698 7654 32 monthly", "iban"),
        ("IBAN DE89370400440532013000.", "iban"),
        ("key " + "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8", "github-token"),
    ],
)
def test_personal_data_and_secrets_are_found_by_shape(text: str, rule: str) -> None:
    hit = first_sensitive(text, allow=frozenset(), blocklist=NONE)
    assert hit is not None
    assert hit.rule == rule


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",
        "on 2024-03-02 at 10:00, 10,000 steps, 3.14159 miles",
        "we lived there 1999-2003; version 1.2.3.4; +1 to that",
        "ssn-like 000-12-3456 and 666-12-3456 were never issued",
        "0000 0000 0000 0000 is no card",
        "GB82 WEST 1234 5698 7654 33 fails mod 97; ISO 8601 and AB12 are no IBAN",
    ],
)
def test_prose_with_numbers_is_not_personal_data(text: str) -> None:
    assert first_sensitive(text, allow=frozenset(), blocklist=NONE) is None


def test_an_allowed_fingerprint_and_the_owners_blocklist() -> None:
    text = "Ping ada@example.org about Project  Falcon and acme-42."
    hit = first_sensitive(text, allow=frozenset(), blocklist=NONE)
    assert hit is not None
    assert hit.fingerprint == fingerprint("ada@example.org")
    assert first_sensitive(text, allow=frozenset({hit.fingerprint}), blocklist=NONE) is None
    blocklist = parse_blocklist("# names\nproject falcon\n\nre: acme-\\d+\n", source="b")
    hit = first_sensitive(
        text, allow=frozenset({fingerprint("ada@example.org")}), blocklist=blocklist
    )
    assert hit is not None
    assert hit.rule == "blocklist:2"
    assert first_sensitive("falconry", allow=frozenset(), blocklist=blocklist) is None


@pytest.mark.parametrize(
    ("content", "line", "needle"),
    [("ok\nre: (unclosed\n", 2, "not a regular expression"), ("re: x*\n", 1, "matches empty")],
)
def test_a_blocklist_line_that_cannot_be_used_is_refused(
    content: str, line: int, needle: str
) -> None:
    with pytest.raises(BlocklistError) as err:
        parse_blocklist(content, source="/h/.tether-scan-blocklist")
    assert str(err.value).startswith(f"/h/.tether-scan-blocklist:{line}: ")
    assert needle in str(err.value)
