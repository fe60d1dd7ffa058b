"""Issuing and verifying access tokens (JWT, pyjwt) with a bounded cache of verified tokens.

A token carries ``sub`` (user name), ``uid`` (the user's immutable id), ``ver`` (the user's
credential version when it was issued), ``roles``, ``iat``, ``exp``, ``iss`` and, in its header,
the ``kid`` of the key that signed it (the auth service compares ``uid`` and ``ver`` with the
stored user on every request, decision 0174). Verification looks the key up by ``kid`` and allows only that
key's algorithm; times are checked against the injected clock (not pyjwt's), with ``LEEWAY_S``
for clock skew between nodes. A verified token is cached (token string -> claims) until it expires, so the
signature is checked once per token, not once per request; the cache holds at most
``cache_entries_max`` tokens and drops the oldest first. Time comes from an injected clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Final

import jwt

from logbroker.auth.keys import KeyRing
from logbroker.errors import AuthenticationError

ISSUER: Final = "logbroker"
TOKEN_CHARS_MAX: Final = 4096
LEEWAY_S: Final = 2
CACHE_ENTRIES_MAX: Final = 10_000
REQUIRED_CLAIMS: Final = ("exp", "iat", "sub", "iss")


@dataclasses.dataclass(frozen=True, slots=True)
class TokenClaims:
    subject: str
    roles: tuple[str, ...]
    issued_at: int
    expires_at: int
    kid: str
    user_id: str | None = None
    credential_version: int | None = None


class Tokens:
    def __init__(self, keys: KeyRing, *, ttl_s: int, clock: Callable[[], float] = time.time,
                 cache_entries_max: int = CACHE_ENTRIES_MAX) -> None:
        assert ttl_s > 0 and cache_entries_max > 0
        self.keys = keys
        self.ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[str, TokenClaims] = {}
        self._cache_max = cache_entries_max

    def issue(self, subject: str, roles: tuple[str, ...], *, user_id: str | None = None,
              credential_version: int | None = None) -> tuple[str, int]:
        """A signed token for ``subject`` and its lifetime in seconds."""
        now = int(self._clock())
        key = self.keys.signing
        assert key.sign_key is not None
        claims: dict[str, Any] = {"sub": subject, "roles": list(roles), "iat": now, "exp": now + self.ttl_s,
                                  "iss": ISSUER}
        if user_id is not None:
            claims["uid"] = user_id
        if credential_version is not None:
            claims["ver"] = credential_version
        return jwt.encode(claims, key.sign_key, algorithm=key.alg, headers={"kid": key.kid}), self.ttl_s

    def verify(self, token: str) -> TokenClaims:
        """The token's claims, or ``AuthenticationError`` naming what is wrong."""
        now = self._clock()
        cached = self._cache.get(token)
        if cached is not None:
            if cached.expires_at + LEEWAY_S > now:
                return cached
            del self._cache[token]
            raise AuthenticationError("the token has expired")
        claims = self._verify_signature(token, now)
        if len(self._cache) >= self._cache_max:
            del self._cache[next(iter(self._cache))]
        self._cache[token] = claims
        return claims

    def _verify_signature(self, token: str, now: float) -> TokenClaims:
        if len(token) > TOKEN_CHARS_MAX:
            raise AuthenticationError(f"the token is longer than {TOKEN_CHARS_MAX} characters")
        if not token.isascii():  # a JWT is base64url and dots; a header's stray bytes are not
            raise AuthenticationError("malformed token: it is not ASCII")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"malformed token: {exc}") from exc
        kid = header.get("kid")
        key = self.keys.keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise AuthenticationError(f"the token was signed with an unknown key id {kid!r}")
        if header.get("alg") != key.alg:
            raise AuthenticationError(f"key {kid!r} only verifies {key.alg} tokens, not {header.get('alg')!r}")
        try:
            raw: dict[str, Any] = jwt.decode(
                token, key.verify_key, algorithms=[key.alg], issuer=ISSUER,
                options={"require": list(REQUIRED_CLAIMS), "verify_exp": False, "verify_iat": False})
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"invalid token: {exc}") from exc
        subject, roles, issued_at, expires_at = raw.get("sub"), raw.get("roles", []), raw["iat"], raw["exp"]
        if not isinstance(subject, str) or not isinstance(roles, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in (issued_at, expires_at)):
            raise AuthenticationError("invalid token claims")
        user_id, version = raw.get("uid"), raw.get("ver")
        if (user_id is not None and not isinstance(user_id, str)) or (version is not None and (
                not isinstance(version, int) or isinstance(version, bool))):
            raise AuthenticationError("invalid token claims")
        if expires_at + LEEWAY_S <= now:
            raise AuthenticationError("the token has expired")
        if issued_at - LEEWAY_S > now:
            raise AuthenticationError("the token was issued in the future")
        return TokenClaims(subject, tuple(str(r) for r in roles), issued_at, expires_at, key.kid, user_id, version)
