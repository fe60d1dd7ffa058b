"""A node's key ring for encryption at rest: key ids and 256-bit keys, one of them current.

The file (``--encryption-keys-file``) is line-oriented text, so an operator can read and diff it::

    # LogBroker encryption key ring: keep it secret (mode 0600)
    current 2
    key 1 <base64 of 32 bytes>
    key 2 <base64 of 32 bytes>

Invariants: ids are in ``[1, KEY_ID_MAX]`` and unique; every key is exactly ``KEY_BYTES`` long;
the current id names a key of the ring. New batches are sealed with the current key; older keys
stay only to open what they sealed (until ``logbroker keys reencrypt`` has moved their batches to
the current one). ``load_ring`` refuses a file that the group or others may read or write: a key
ring that leaked is no protection.

Parsing and formatting are pure; ``load_ring`` and ``write_ring`` do the file I/O (``write_ring``
atomically: temp file created 0600, fsync, rename, fsync the directory).
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from segments.checkpoint import write_atomic

KEY_BYTES: Final = 32
KEY_ID_MAX: Final = (1 << 32) - 1
KEYS_MAX: Final = 1024
RING_FILE_BYTES_MAX: Final = 256 * 1024
RING_FILE_MODE: Final = 0o600
HEADER_LINE: Final = "# LogBroker encryption key ring: keep it secret (mode 0600)"


class KeyRingError(ValueError):
    """A key ring file that is missing, unsafe or malformed (the message says which and where)."""


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Key id to key, and the id new batches are sealed with."""

    keys: Mapping[int, bytes]
    current: int
    _ciphers: dict[int, object] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyRingError("a key ring needs at least one key")
        if len(self.keys) > KEYS_MAX:
            raise KeyRingError(f"a key ring holds at most {KEYS_MAX} keys, not {len(self.keys)}")
        for key_id, key in self.keys.items():
            if not 1 <= key_id <= KEY_ID_MAX:
                raise KeyRingError(f"key id {key_id} is outside 1..{KEY_ID_MAX}")
            if len(key) != KEY_BYTES:
                raise KeyRingError(f"key {key_id} is {len(key)} bytes; an AES-256 key is {KEY_BYTES}")
        if self.current not in self.keys:
            raise KeyRingError(f"the current key id {self.current} is not in the ring")

    def __repr__(self) -> str:  # never the keys themselves, in a log line or a traceback
        return f"KeyRing(ids={sorted(self.keys)}, current={self.current})"

    def rotated(self, new_key: bytes) -> KeyRing:
        """This ring with ``new_key`` added under the next free id and made current."""
        new_id = max(self.keys) + 1
        if new_id > KEY_ID_MAX:
            raise KeyRingError("no key id is left above the highest one in the ring")
        return KeyRing({**self.keys, new_id: new_key}, new_id)

    def without(self, key_id: int) -> KeyRing:
        """This ring without ``key_id`` (never the current key)."""
        if key_id == self.current:
            raise KeyRingError(f"key {key_id} is the current key; rotate before removing it")
        return KeyRing({k: v for k, v in self.keys.items() if k != key_id}, self.current)


def new_key(random_bytes: Callable[[int], bytes] = os.urandom) -> bytes:
    return random_bytes(KEY_BYTES)


def format_ring(ring: KeyRing) -> str:
    lines = [HEADER_LINE, f"current {ring.current}"]
    lines += [f"key {key_id} {base64.b64encode(ring.keys[key_id]).decode('ascii')}" for key_id in sorted(ring.keys)]
    return "\n".join(lines) + "\n"


def parse_ring(text: str, *, source: str = "key ring") -> KeyRing:
    """The ring ``text`` describes, else ``KeyRingError`` naming the line at fault."""
    keys: dict[int, bytes] = {}
    current: int | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        try:
            if words[0] == "current" and len(words) == 2 and current is None:
                current = int(words[1])
            elif words[0] == "key" and len(words) == 3 and int(words[1]) not in keys:
                keys[int(words[1])] = base64.b64decode(words[2], validate=True)
            else:
                raise KeyRingError(f"{source}, line {number}: expected 'current ID' (once) or 'key ID BASE64' "
                                   "(each id once)")
        except (ValueError, binascii.Error) as exc:
            if isinstance(exc, KeyRingError):
                raise
            raise KeyRingError(f"{source}, line {number}: {exc}") from exc
    if current is None:
        raise KeyRingError(f"{source}: no 'current ID' line")
    try:
        return KeyRing(keys, current)
    except KeyRingError as exc:
        raise KeyRingError(f"{source}: {exc}") from exc


def load_ring(path: str) -> KeyRing:
    """Read and check the key ring at ``path``: refused unless only its owner may read or write it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise KeyRingError(f"cannot open the key ring {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KeyRingError(f"the key ring {path} is not a regular file")
        if mode & 0o077:
            raise KeyRingError(f"the key ring {path} has mode {stat.S_IMODE(mode):04o}: the group or others may "
                               f"access it; run chmod 600 {path}")
        data = f.read(RING_FILE_BYTES_MAX + 1)
    if len(data) > RING_FILE_BYTES_MAX:
        raise KeyRingError(f"the key ring {path} is larger than {RING_FILE_BYTES_MAX} bytes")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise KeyRingError(f"the key ring {path} is not ASCII text") from exc
    return parse_ring(text, source=path)


def write_ring(path: str, ring: KeyRing, fsync: Callable[[int], None] = os.fsync) -> None:
    """Write ``ring`` to ``path`` (mode 0600) so that a crash leaves the old ring or the new one."""
    write_atomic(path, format_ring(ring).encode("ascii"), fsync, mode=RING_FILE_MODE)
    os.chmod(path, RING_FILE_MODE)
