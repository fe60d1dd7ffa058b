"""Seals on the etcd records that grant access, so that a write to etcd alone grants nothing
(decision 0225; pure: no I/O).

A sealed value is the record's JSON object with one more field, ``_seal``: HMAC-SHA256, under a
key derived from the cluster's shared secret, over the record's full etcd key and its canonical
JSON without that field. Binding the key means a valid record cannot be copied under another
name (``users/alice``'s admin record put at ``users/mallory``). Sealed kinds: ``users`` (password
hash, role, credential version), ``acls`` and ``groups`` (grants), ``topics`` (the owner) and
``nodes``/``members`` (the addresses clients and peers are sent to), and ``usage`` (what users are
billed for). Placement, ISR and
leadership (``partitions``, ``leaders``) and the leased ``locks`` are not sealed: they are compared
by value in guards, and a forged one denies service but grants no access.

Invariant: with a key, ``open`` returns a sealed kind's record only when its seal verifies
(``SealError`` otherwise: the cache then ignores the put); without a key (a development cluster
with no cluster token) nothing is sealed and nothing is checked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Final

from coordinator.errors import CoordinatorError
from coordinator.etcd_keys import decode, encode

SEAL_FIELD: Final = "_seal"
SEALED_KINDS: Final = frozenset({"users", "acls", "groups", "topics", "nodes", "members", "usage"})
KEY_CONTEXT: Final = b"logbroker etcd record seal v1"


class SealError(CoordinatorError):
    """A record of a sealed kind whose seal is missing (``missing``: stored before seals, or
    forged) or does not verify."""

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


def _canonical(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class RecordSeal:
    """Seals and opens the values of one cluster's keys (``prefix`` is its etcd key prefix)."""

    def __init__(self, secret: str | None, prefix: str) -> None:
        self._key = hmac.new(secret.encode(), KEY_CONTEXT, hashlib.sha256).digest() if secret else None
        self._prefix = prefix

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def _mac(self, relative_key: str, value: Mapping[str, Any]) -> str:
        assert self._key is not None
        message = (self._prefix + relative_key).encode() + b"\0" + _canonical(value)
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    @staticmethod
    def sealed(relative_key: str) -> bool:
        return relative_key.split("/", 1)[0] in SEALED_KINDS

    def seal(self, relative_key: str, value: Mapping[str, Any]) -> bytes:
        """The bytes to store at ``relative_key`` (sealed when its kind is and a key is set)."""
        assert SEAL_FIELD not in value, f"{SEAL_FIELD} is reserved"
        if self._key is None or not self.sealed(relative_key):
            return encode(value)
        return encode({**value, SEAL_FIELD: self._mac(relative_key, value)})

    def open(self, relative_key: str, raw: bytes) -> dict[str, Any]:
        """The record stored at ``relative_key``, its seal checked and removed (``SealError``
        when a sealed kind's seal is missing or wrong; ``ValueError`` when it is not JSON)."""
        value = decode(raw)
        mac = value.pop(SEAL_FIELD, None)
        if self._key is None or not self.sealed(relative_key):
            return value
        if not isinstance(mac, str):
            raise SealError(f"{relative_key} carries no seal", missing=True)
        if not hmac.compare_digest(mac, self._mac(relative_key, value)):
            raise SealError(f"{relative_key} has a seal that does not verify", missing=False)
        return value
