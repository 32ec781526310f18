"""The egress rules (``core/egress.py``), property-tested: every spelling of a refused
address is refused, every IPv6 form that carries one too, public addresses pass, the
allow-list grammar is the one ``tether.toml`` accepts, and a tainted session can add
nothing to a URL the owner wrote."""

from __future__ import annotations

import ipaddress
import socket

from hypothesis import given
from hypothesis import strategies as st

from tether.config import allow_entry_problem
from tether.core import egress

REFUSED_V4 = {
    "127.0.0.0/8": "loopback",
    "10.0.0.0/8": "private",
    "172.16.0.0/12": "private",
    "192.168.0.0/16": "private",
    "169.254.0.0/16": "link_local",
    "0.0.0.0/32": "unspecified",
    "224.0.0.0/4": "multicast",
    "100.64.0.0/10": "reserved",
}
REFUSED_V6 = {
    "::1/128": "loopback",
    "fc00::/7": "unique_local",
    "fe80::/10": "link_local",
    "::/128": "unspecified",
    "ff00::/8": "multicast",
}


def _in(network: str) -> st.SearchStrategy[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    net = ipaddress.ip_network(network)
    return st.integers(0, net.num_addresses - 1).map(lambda i: net[i])


refused_v4 = st.sampled_from(sorted(REFUSED_V4)).flatmap(
    lambda n: _in(n).map(lambda a: (a, REFUSED_V4[n]))
)
refused_v6 = st.sampled_from(sorted(REFUSED_V6)).flatmap(
    lambda n: _in(n).map(lambda a: (a, REFUSED_V6[n]))
)
any_v4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
any_v6 = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)


def _carriers(v4: ipaddress.IPv4Address) -> list[ipaddress.IPv6Address]:
    n = int(v4)
    return [
        ipaddress.IPv6Address((0xFFFF << 32) | n),  # ::ffff:a.b.c.d
        ipaddress.IPv6Address((0x64FF9B << 96) | n),  # 64:ff9b::a.b.c.d
        ipaddress.IPv6Address((0x2002 << 112) | (n << 80)),  # 2002:aabb:ccdd::
    ]


@given(refused_v4)
def test_a_refused_ipv4_address_is_refused_in_every_ipv6_form(
    found: tuple[ipaddress.IPv4Address, str],
) -> None:
    address, cls = found
    assert egress.address_class(address) == cls
    for carrier in _carriers(address):
        assert egress.address_class(carrier) == cls, carrier
        assert egress.address_class(egress.parse_ip(f"[{carrier}]") or carrier) == cls


@given(refused_v6)
def test_refused_ipv6_ranges(found: tuple[ipaddress.IPv6Address, str]) -> None:
    address, cls = found
    assert egress.address_class(address) == cls


mapped = any_v4.map(lambda a: ipaddress.IPv6Address((0xFFFF << 32) | int(a)))


@given(st.one_of(any_v4, any_v6, mapped))
def test_only_public_addresses_pass(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    if egress.address_class(address) is None:
        inner = egress.embedded_ipv4(address)
        assert (inner or address).is_global
        assert not (inner or address).is_multicast
        assert not address.is_loopback


@given(any_v4)
def test_an_ipv6_form_reaches_what_its_ipv4_address_reaches(v4: ipaddress.IPv4Address) -> None:
    mapped, nat64, sixtofour = _carriers(v4)
    expected = egress.address_class(v4)
    assert egress.address_class(mapped) == expected
    assert egress.address_class(nat64) == expected
    assert egress.address_class(sixtofour) == expected


def _spellings(v4: ipaddress.IPv4Address, data: st.DataObject) -> list[str]:
    n = int(v4)
    b = list(v4.packed)

    def part(value: int) -> str:
        style = data.draw(st.sampled_from(["dec", "oct", "hex", "HEX"]))
        if style == "oct":
            return "0" + format(value, "o")
        if style == "hex":
            return "0x" + format(value, "x")
        if style == "HEX":
            return "0X" + format(value, "X")
        return str(value)

    return [
        str(n),
        part(n),
        f"{part(b[0])}.{part((b[1] << 16) | (b[2] << 8) | b[3])}",
        f"{part(b[0])}.{part(b[1])}.{part((b[2] << 8) | b[3])}",
        ".".join(part(x) for x in b),
        ".".join(str(x) for x in b) + ".",
    ]


@given(any_v4, st.data())
def test_every_ipv4_spelling_is_the_same_address(
    v4: ipaddress.IPv4Address, data: st.DataObject
) -> None:
    for spelling in _spellings(v4, data):
        assert egress.parse_ip(spelling) == v4, spelling
        assert egress.host_key(spelling) == str(v4)


@given(st.text(alphabet="0123456789abcdefxX.", min_size=1, max_size=20))
def test_ipv4_literals_agree_with_the_system_resolver(text: str) -> None:
    """``inet_aton`` (what getaddrinfo uses for a numeric host) is the oracle: we read
    as an address exactly what it reads, and as the same address."""
    try:
        system = ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        system = None
    assert egress.parse_ipv4(text) == system


hosts = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10})(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)
entries = st.one_of(
    hosts,
    st.tuples(hosts, st.integers(1, 65535)).map(lambda t: f"{t[0]}:{t[1]}"),
    any_v4.map(str),
    st.tuples(any_v6, st.integers(1, 65535)).map(lambda t: f"[{t[0]}]:{t[1]}"),
    any_v6.map(str),
    st.text(alphabet="ab1:.[]/*-x ", max_size=14),
)


@given(entries)
def test_the_allow_grammar_is_the_one_config_accepts(entry: str) -> None:
    try:
        egress.parse_allow(entry)
        parsed = True
    except ValueError:
        parsed = False
    assert parsed == (allow_entry_problem(entry) is None), entry


@given(hosts, st.integers(1, 65535), st.integers(1, 65535))
def test_an_allow_entry_matches_its_host_and_port(host: str, port: int, other: int) -> None:
    with_port = egress.parse_allow(f"{host}:{port}")
    assert with_port.matches(host.upper(), port)
    assert with_port.matches(host + ".", port)
    assert with_port.matches(host, other) == (other == port)
    assert egress.parse_allow(host).matches(host, other)


def test_an_allowed_address_matches_in_any_spelling() -> None:
    entry = egress.parse_allow("127.0.0.1:8080")
    for spelling in ["127.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "127.0.0.1."]:
        assert entry.matches(spelling, 8080), spelling
    assert not entry.matches("localhost", 8080)  # a name is not what it resolves to


paths = st.from_regex(
    r"(/[a-zA-Z0-9._~-]{0,8}){0,3}(\?[a-z]{1,4}=[a-zA-Z0-9]{0,6})?", fullmatch=True
)
urls = st.tuples(st.sampled_from(["http", "https"]), hosts, paths).map(
    lambda t: f"{t[0]}://{t[1]}{t[2]}"
)


@given(
    urls, st.sampled_from(["", ".", ",", ")", ").", "!", "'"]), st.sampled_from(["see ", "(", "<"])
)
def test_a_url_the_owner_wrote_may_be_fetched(url: str, after: str, before: str) -> None:
    owner = egress.urls_in(f"Please read {before}{url}{after} and tell me.")
    assert (
        egress.tainted_refusal(url, mode="owner-urls", owner_urls=owner, host_allowed=False) is None
    )
    assert egress.tainted_refusal(url, mode="allow-list", owner_urls=owner, host_allowed=False)


@given(urls, st.text(alphabet="abcXYZ0123=&%", min_size=1, max_size=12))
def test_nothing_can_be_added_to_a_url_the_owner_wrote(url: str, extra: str) -> None:
    owner = egress.urls_in(f"Please read {url} today.")
    longer = url + ("&" if "?" in url else "?d=") + extra
    assert egress.tainted_refusal(longer, mode="owner-urls", owner_urls=owner, host_allowed=False)
    # An allowed host is the owner's own choice: it may receive anything.
    assert (
        egress.tainted_refusal(longer, mode="owner-urls", owner_urls=owner, host_allowed=True)
        is None
    )
    assert egress.tainted_refusal(longer, mode="any", owner_urls=owner, host_allowed=False) is None


def test_case_of_scheme_and_host_and_an_empty_path_do_not_matter() -> None:
    owner = egress.urls_in("read HTTPS://Example.COM")
    for same in ["https://example.com", "https://example.com/", "https://EXAMPLE.com/#top"]:
        assert egress.canonical_url(same) in owner
    assert egress.canonical_url("https://example.com/Path") not in egress.urls_in(
        "https://example.com/path"
    )
