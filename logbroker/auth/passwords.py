"""Password hashing with scrypt (``hashlib.scrypt``, memory-hard) and a per-user random salt.

The stored form is ``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>``, so the cost parameters travel
with each hash and can be raised later without breaking stored users. Checking compares in
constant time. Hashing costs tens of milliseconds of CPU by design: callers run it off the event
loop (``AuthService`` does). Passwords are never logged or returned.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Final

from coordinator.errors import InvalidUserError

SCHEME: Final = "scrypt"
SCRYPT_N: Final = 2**14
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
SCRYPT_N_MAX: Final = 2**20
SALT_BYTES: Final = 16
HASH_BYTES: Final = 32
PASSWORD_CHARS_MIN: Final = 8
PASSWORD_BYTES_MAX: Final = 1024
SCRYPT_MAXMEM_BYTES: Final = 256 * 1024 * 1024


def validate_password(password: object) -> str:
    if not isinstance(password, str):
        raise InvalidUserError("password must be a string")
    if len(password) < PASSWORD_CHARS_MIN or len(password.encode()) > PASSWORD_BYTES_MAX:
        raise InvalidUserError(f"password must have at least {PASSWORD_CHARS_MIN} characters "
                               f"and at most {PASSWORD_BYTES_MAX} bytes")
    return password


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=HASH_BYTES,
                          maxmem=SCRYPT_MAXMEM_BYTES)


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """The stored form of ``password`` with a fresh random salt (or ``salt``, for tests)."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = _derive(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return "$".join((SCHEME, str(SCRYPT_N), str(SCRYPT_R), str(SCRYPT_P),
                     base64.b64encode(salt).decode(), base64.b64encode(digest).decode()))


def check_password(password: str, stored: str) -> bool:
    """True when ``password`` matches ``stored``; False for a mismatch or a malformed hash."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, expected = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except ValueError:
        return False
    if not (2 <= n <= SCRYPT_N_MAX and 1 <= r <= 32 and 1 <= p <= 16) or len(expected) != HASH_BYTES:
        return False
    return hmac.compare_digest(_derive(password, salt, n, r, p), expected)


DUMMY_HASH: Final = hash_password("not-a-real-password", salt=b"\0" * SALT_BYTES)
"""Checked against when a user does not exist, so a login costs the same whether it does or not."""
