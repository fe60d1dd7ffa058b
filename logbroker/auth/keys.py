"""JWT signing and verification keys, with rotation by key id (``kid``).

A node signs new tokens with one key (``signing_kid``) and accepts tokens signed by any key of
its ring, so rotating is: add the new key, make it the signing key, and remove the old one once
the tokens it signed have expired. Each key is bound to exactly one algorithm; verification
allows only that algorithm, which refuses ``alg: none`` and HMAC/RSA confusion by construction.

The ring comes from a TOML file (``jwt_keys_file``)::

    signing_kid = "2026-11"
    [[keys]]
    kid = "2026-10"
    alg = "HS256"
    secret = "... at least 32 bytes ..."        # or secret_file = "path"
    [[keys]]
    kid = "2026-11"
    alg = "ES256"                               # or RS256
    private_key_file = "jwt-2026-11.pem"        # only on nodes that issue tokens
    public_key_file = "jwt-2026-11.pub.pem"

or from a single shared secret (``jwt_secret``, HS256). Relative paths are relative to the file.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from logbroker.errors import InvalidRequestError

ALGORITHMS: Final = ("HS256", "RS256", "ES256")
HMAC_SECRET_BYTES_MIN: Final = 32
KEY_FILE_BYTES_MAX: Final = 1024 * 1024
KID_CHARS_MAX: Final = 64


@dataclasses.dataclass(frozen=True, slots=True)
class JwtKey:
    kid: str
    alg: str
    verify_key: Any
    sign_key: Any | None


@dataclasses.dataclass(frozen=True, slots=True)
class KeyRing:
    signing_kid: str
    keys: Mapping[str, JwtKey]

    def __post_init__(self) -> None:
        signing = self.keys.get(self.signing_kid)
        if signing is None or signing.sign_key is None:
            raise InvalidRequestError(f"jwt keys: the signing key {self.signing_kid!r} is missing or has no "
                                      "private part")

    @property
    def signing(self) -> JwtKey:
        return self.keys[self.signing_kid]

    @classmethod
    def from_secret(cls, secret: str | bytes, kid: str) -> KeyRing:
        key = _hmac_key(kid, secret.encode() if isinstance(secret, str) else secret)
        return cls(kid, {kid: key})

    @classmethod
    def load(cls, path: str) -> KeyRing:
        try:
            with open(path, "rb") as f:
                raw = tomllib.loads(f.read(KEY_FILE_BYTES_MAX).decode())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InvalidRequestError(f"jwt keys file {path}: {exc}") from exc
        base = os.path.dirname(os.path.abspath(path))
        entries = raw.get("keys")
        if not isinstance(entries, list) or not entries:
            raise InvalidRequestError(f"jwt keys file {path}: needs at least one [[keys]] entry")
        keys: dict[str, JwtKey] = {}
        for entry in entries:
            key = _key_from_entry(entry, base)
            if key.kid in keys:
                raise InvalidRequestError(f"jwt keys file {path}: kid {key.kid!r} appears twice")
            keys[key.kid] = key
        return cls(str(raw.get("signing_kid", "")), keys)


def _key_from_entry(entry: Any, base: str) -> JwtKey:
    if not isinstance(entry, dict):
        raise InvalidRequestError("jwt keys: each [[keys]] entry must be a table")
    kid, alg = entry.get("kid"), entry.get("alg")
    if not isinstance(kid, str) or not 1 <= len(kid) <= KID_CHARS_MAX:
        raise InvalidRequestError(f"jwt keys: kid must be a string of 1-{KID_CHARS_MAX} characters, not {kid!r}")
    if alg not in ALGORITHMS:
        raise InvalidRequestError(f"jwt keys: key {kid!r}: alg must be one of {ALGORITHMS}, not {alg!r}")
    if alg == "HS256":
        if "secret_file" in entry:
            secret = _read(base, entry["secret_file"]).strip()
        elif isinstance(entry.get("secret"), str):
            secret = entry["secret"].encode()
        else:
            raise InvalidRequestError(f"jwt keys: key {kid!r} needs secret or secret_file")
        return _hmac_key(kid, secret)
    private = None
    if "private_key_file" in entry:
        private = serialization.load_pem_private_key(_read(base, entry["private_key_file"]), password=None)
    if "public_key_file" in entry:
        public = serialization.load_pem_public_key(_read(base, entry["public_key_file"]))
    elif private is not None:
        public = private.public_key()
    else:
        raise InvalidRequestError(f"jwt keys: key {kid!r} needs public_key_file or private_key_file")
    expected = rsa.RSAPublicKey if alg == "RS256" else ec.EllipticCurvePublicKey
    if not isinstance(public, expected):
        raise InvalidRequestError(f"jwt keys: key {kid!r} is not a key for {alg}")
    return JwtKey(kid, alg, public, private)


def _hmac_key(kid: str, secret: bytes) -> JwtKey:
    if len(secret) < HMAC_SECRET_BYTES_MIN:
        raise InvalidRequestError(f"jwt keys: the HS256 secret of {kid!r} must have at least "
                                  f"{HMAC_SECRET_BYTES_MIN} bytes")
    return JwtKey(kid, "HS256", secret, secret)


def _read(base: str, name: object) -> bytes:
    if not isinstance(name, str):
        raise InvalidRequestError(f"jwt keys: a file name must be a string, not {name!r}")
    path = os.path.join(base, name)
    try:
        with open(path, "rb") as f:
            return f.read(KEY_FILE_BYTES_MAX)
    except OSError as exc:
        raise InvalidRequestError(f"jwt keys: {exc}") from exc
