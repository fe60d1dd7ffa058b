"""Client addresses behind trusted proxies and per-address share keys (``logbroker.proxies``)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.proxies import FORWARDED_HOPS_MAX, TrustedProxies, parse_networks, share_key

PROXIES = TrustedProxies.parse("10.0.0.0/8, 192.168.1.5, fd00::/8")


def test_networks_parse_and_a_bad_entry_is_named():
    assert [str(n) for n in parse_networks(" 10.0.0.0/8,,192.168.1.5 ,::1")] == [
        "10.0.0.0/8", "192.168.1.5/32", "::1/128"]
    with pytest.raises(ValueError, match=r"'10\.0\.0\.300'"):
        parse_networks("10.0.0.0/8,10.0.0.300")


def test_an_untrusted_peer_is_the_client_whatever_it_forwards():
    assert PROXIES.client_address("203.0.113.9", ["1.2.3.4"]) == "203.0.113.9"
    assert TrustedProxies().client_address("10.0.0.1", ["1.2.3.4"]) == "10.0.0.1"


def test_behind_trusted_proxies_the_rightmost_untrusted_hop_is_the_client():
    assert PROXIES.client_address("10.1.1.1", ["6.6.6.6, 198.51.100.7"]) == "198.51.100.7"
    assert PROXIES.client_address("10.1.1.1", ["6.6.6.6, 198.51.100.7, 10.2.2.2", "192.168.1.5"]) == "198.51.100.7"
    assert PROXIES.client_address("10.1.1.1", []) == "10.1.1.1", "no header: the proxy itself"
    assert PROXIES.client_address("10.1.1.1", ["10.3.3.3"]) == "10.3.3.3", "all trusted: the leftmost"
    assert PROXIES.client_address("10.1.1.1", ["1.1.1.1, junk, 10.2.2.2"]) == "10.2.2.2", "junk ends the walk"
    assert PROXIES.client_address("::ffff:10.1.1.1", ["[2001:db8::1]"]) == "2001:db8::1"
    assert PROXIES.client_address("fd00::1", ["::ffff:198.51.100.7"]) == "198.51.100.7"


def test_a_long_chain_is_read_only_so_far():
    hops = ["10.9.9.9"] * (FORWARDED_HOPS_MAX + 5)
    hops[0] = "1.1.1.1"
    assert PROXIES.client_address("10.1.1.1", [", ".join(hops)]) == "10.9.9.9"


@given(st.lists(st.ip_addresses(), max_size=8), st.ip_addresses(v=4))
def test_the_client_is_a_hop_no_trusted_proxy_vouches_past(forged, client):
    """Whatever a client puts in front, it is seen as itself (or as what lies to its right)."""
    chain = [*(str(a) for a in forged), str(client), "10.4.4.4"]
    seen = PROXIES.client_address("10.1.1.1", [", ".join(chain)])
    if not PROXIES.trusts(str(client)):
        assert seen == str(client)


def test_share_keys_are_ipv4_addresses_or_ipv6_slash_64s():
    assert share_key("198.51.100.7") == "198.51.100.7"
    assert share_key("::ffff:198.51.100.7") == "198.51.100.7"
    assert share_key("2001:db8:1:2:aaaa::1") == share_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert share_key("2001:db8:1:3::1") != share_key("2001:db8:1:2::1")
    assert share_key("not-an-address") == "not-an-address"
    assert ipaddress.ip_network(share_key("fe80::1%eth0")).prefixlen == 64
