"""The injection corpus (issue 24) through the real agent loop: every case ends with
memory.md unchanged, no request reaching a refused address (the loopback sink counts
hits; an audit hook refuses, before the socket call, any lookup or connection that is not
loopback), and each refusal in the session log, the daemon's log and telemetry. The cases
and the runner are ``benchmarks/injection_corpus.py``, which prints the same figures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench_helpers import load_benchmark

pytestmark = pytest.mark.anyio


CORPUS = load_benchmark("injection_corpus")
CASES = CORPUS.cases()
INPUTS = load_benchmark("injection_inputs")
PROBES = INPUTS.probes()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with CORPUS.corpus(tmp_path_factory.mktemp("corpus")) as c:
        yield c


def test_the_corpus_covers_what_the_issue_names() -> None:
    assert len(CASES) >= 30
    names = {c.name for c in CASES}
    kinds = {c.kind for c in CASES}
    assert {"identity", "note", "promote", "page", "exfil", "address", "redirect"} <= kinds
    for needed in [
        "addr-loopback", "addr-ten", "addr-172-16", "addr-192-168", "addr-metadata",
        "addr-ipv6-loopback", "addr-mapped-loopback", "addr-decimal", "addr-octal",
        "addr-localhost", "redirect-loopback", "exfil-query", "note-secret", "note-promote",
        "identity-add", "identity-remove", "identity-consolidate", "page-write",
    ]:  # fmt: skip
        assert needed in names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_the_attack_is_stopped(corpus: Any, case: Any) -> None:
    outcome = await corpus.run(case)
    assert outcome.problems == []
    assert outcome.got_through == 0
    assert outcome.stopped


def test_the_inputs_cover_every_item_of_issue_34() -> None:
    assert {p.item for p in PROBES} == {3, 4, 5, 6, 7, 8}
    assert len({p.name for p in PROBES}) == len(PROBES)
    assert {c.name for c in CASES if c.kind == "hostile"} >= {
        "hostile-to-mailto", "hostile-to-data", "hostile-to-javascript", "hostile-to-tel",
        "hostile-to-urn", "hostile-to-about", "hostile-error-body", "hostile-weird-headers",
    }  # fmt: skip


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[Any]:
    with INPUTS.FakeLlama(n_ctx=16384, parallel=2) as fake:
        yield fake


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_the_input_is_held(
    probe: Any, fake_llm: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    held = INPUTS.run_probe(probe, tmp_path_factory.mktemp("inputs"), fake_llm)
    assert held.problems == []
    assert held.held
