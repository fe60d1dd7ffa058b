"""Who a client is, by address: trusted proxies, ``X-Forwarded-For`` and per-address shares (pure).

Every shared budget keyed by address (connections per address, the login throttle) needs the
client's address, not the address of a proxy in front of it. ``TrustedProxies`` holds the
node's ``trusted_proxies`` setting (CIDRs). Only when the direct peer is in it is
``X-Forwarded-For`` read, and then from the right: each trusted proxy appends the address it
saw, so the rightmost hop that is not a trusted proxy is the first one no trusted party vouches
for; anything to its left was written by the client and may be forged. A header that cannot be
parsed yields the direct peer.

``share_key`` is what a per-address share counts: an IPv4 address, or the /64 an IPv6 address
belongs to (one host usually holds a whole /64, so counting single IPv6 addresses would give one
client 2**64 shares). An IPv4 address mapped into IPv6 counts as the IPv4 address.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from typing import Final

IPV6_SHARE_PREFIX: Final = 64
FORWARDED_HOPS_MAX: Final = 32
"""Hops of ``X-Forwarded-For`` read at most, from the right: a longer chain is cut there."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_networks(text: str) -> tuple[Network, ...]:
    """The networks of a comma-separated CIDR list (a bare address is a /32 or /128);
    ``ValueError`` naming the first bad entry."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ValueError(f"{item!r} is not an address or CIDR network") from exc
    return tuple(networks)


def parse_address(text: str) -> Address | None:
    """The address in ``text`` (brackets and a zone id allowed), IPv4-mapped IPv6 unmapped; None
    when it is not an address."""
    text = text.strip().removeprefix("[").removesuffix("]").partition("%")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def share_key(address: str) -> str:
    """The key a per-address share counts ``address`` under (see the module doc)."""
    parsed = parse_address(address)
    if parsed is None:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((parsed, IPV6_SHARE_PREFIX), strict=False))
    return str(parsed)


class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` is believed and whose own address gets no share."""

    __slots__ = ("_networks",)

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self._networks = tuple(networks)

    @classmethod
    def parse(cls, text: str) -> TrustedProxies:
        return cls(parse_networks(text))

    def __bool__(self) -> bool:
        return bool(self._networks)

    def trusts(self, address: str | None) -> bool:
        if not self._networks or not address:
            return False
        parsed = parse_address(address)
        return parsed is not None and any(parsed.version == net.version and parsed in net for net in self._networks)

    def client_address(self, peer: str, forwarded_for: Iterable[str]) -> str:
        """The client's address: ``peer``, or when ``peer`` is a trusted proxy, the rightmost hop of
        the ``X-Forwarded-For`` header values (in order) that is not a trusted proxy (the leftmost
        hop when all are). A hop that is not an address ends the walk at the hop before it."""
        if not self.trusts(peer):
            return peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        client = peer
        for hop in reversed(hops[-FORWARDED_HOPS_MAX:]):
            parsed = parse_address(hop)
            if parsed is None:
                return client
            client = str(parsed)
            if not self.trusts(client):
                return client
        return client


@functools.lru_cache(maxsize=4)
def trusted_proxies(setting: str) -> TrustedProxies:
    """``TrustedProxies`` of a ``trusted_proxies`` setting, parsed once (a node has one setting)."""
    return TrustedProxies.parse(setting)
