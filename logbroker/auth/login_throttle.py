"""Login throttling (decisions 0180, 0238): failed logins slow down guessing, and do not starve real logins.

Failures are counted per username and per (username, address) pair, never per address alone:
everyone behind one proxy or NAT shares an address, and one person's failures there must not lock
out the others (the address is the client's, read from ``X-Forwarded-For`` only behind a trusted
proxy, ``logbroker.proxies``). Past a few free failures, each further failure blocks that key for
``BACKOFF_BASE_S * 2**n`` (at most ``BACKOFF_MAX_S``); a key's count is forgotten ``FORGET_S``
after its last failure. A blocked attempt is refused (429 with ``Retry-After``) before its
password is hashed, so a flood of wrong passwords costs no hashing past the free failures, and at
most ``IN_FLIGHT_MAX`` attempts per address and per username (per pair for a trusted pair) are
hashed at once; the rest are refused at once too (a bound on concurrency, not a lockout), so a
burst cannot slip past the count before its failures are known.

A pair that logged in successfully is *trusted* for ``TRUST_S``: its attempts ignore the
username key, which others' failures raise, and only their own pair key applies. So a user who
logged in before from an address is not locked out by someone guessing their name elsewhere; a
first login from an address is subject to both keys. ``AuthService`` hashes trusted attempts in a lane of their
own. Everything is in memory (bounded by ``KEYS_MAX`` and ``TRUSTED_MAX``; the least recently
touched entries go first) and starts empty at a restart. Time comes from the caller's clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from logbroker.errors import TooManyRequestsError

FREE_FAILURES: Final = {"user": 5, "pair": 3}
IN_FLIGHT_MAX: Final = {"user": 2, "address": 4, "pair": 8}
BACKOFF_BASE_S: Final = 0.25
BACKOFF_MAX_S: Final = 60.0
FORGET_S: Final = 15 * 60.0
TRUST_S: Final = 30 * 24 * 3600.0
KEYS_MAX: Final = 100_000
TRUSTED_MAX: Final = 100_000

Key = tuple[str, ...]


class _Failures:
    __slots__ = ("blocked_until", "count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.blocked_until = 0.0


class LoginThrottle:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._failures: dict[Key, _Failures] = {}
        self._in_flight: dict[Key, int] = {}
        self._trusted: dict[tuple[str, str], float] = {}

    def begin(self, user: str, address: str) -> bool:
        """Admit an attempt (else ``TooManyRequestsError``); True when the pair is trusted. Each
        admitted attempt must be followed by ``end``."""
        now = self._clock()
        trusted = self._trusted.get((user, address), -math.inf) > now - TRUST_S
        keys = [("pair", user, address)] if trusted else [("pair", user, address), ("user", user)]
        for key in keys:
            entry = self._failures.get(key)
            if entry is not None and entry.blocked_until > now:
                wait = entry.blocked_until - now
                raise TooManyRequestsError(f"too many failed logins {_for(key)}; retry in {math.ceil(wait)} s",
                                           retry_after_s=math.ceil(wait * 1000) / 1000)
        counted = _counted(user, address, trusted)
        for key in counted:
            if self._in_flight.get(key, 0) >= IN_FLIGHT_MAX[key[0]]:
                raise TooManyRequestsError(f"too many logins at once {_for(key)}", retry_after_s=1.0)
        for key in counted:
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
        return trusted

    def end(self, user: str, address: str, trusted: bool, ok: bool | None) -> None:
        """The outcome of an admitted attempt: True logged in, False a wrong password or unknown
        user, None not checked (refused for another reason)."""
        for key in _counted(user, address, trusted):
            left = self._in_flight.pop(key) - 1
            if left:
                self._in_flight[key] = left
        now = self._clock()
        if ok:
            self._failures.pop(("pair", user, address), None)
            self._trusted.pop((user, address), None)
            self._trusted[(user, address)] = now
            if len(self._trusted) > TRUSTED_MAX:
                del self._trusted[next(iter(self._trusted))]
        elif ok is False:
            failed: tuple[Key, ...] = (("pair", user, address), ("user", user))
            for key in failed:
                self._fail(key, now)

    def _fail(self, key: Key, now: float) -> None:
        entry = self._failures.pop(key, None)
        if entry is None or now - entry.last > FORGET_S:
            entry = _Failures()
        self._failures[key] = entry  # most recently touched last
        if len(self._failures) > KEYS_MAX:
            del self._failures[next(iter(self._failures))]
        entry.count += 1
        entry.last = now
        excess = entry.count - FREE_FAILURES[key[0]]
        if excess > 0:
            entry.blocked_until = now + min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** min(excess - 1, 32))


def _counted(user: str, address: str, trusted: bool) -> tuple[Key, ...]:
    """The keys whose attempts in flight are bounded: a trusted pair's own, else the name's and
    the address's."""
    return (("pair", user, address),) if trusted else (("user", user), ("address", address))


def _for(key: Key) -> str:
    if key[0] == "user":
        return f"for user {key[1]!r}"
    if key[0] == "address":
        return f"from {key[1]}"
    return f"for user {key[1]!r} from {key[2]}"
