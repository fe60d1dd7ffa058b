"""The node's encryption at rest: which batches it seals, and opening them for readers (0315, 0316).

A node started with ``--encryption-keys-file`` (or ``LOGBROKER_ENCRYPTION_KEYS``) holds a key
ring. The leader seals a batch after it was checked and before it is appended (``seal``), when
the topic's ``encryption`` config says so (default: ``on`` when the node has a ring). Followers
copy the sealed bytes as they are, so every node of a cluster holds the same ring (decision
0316). Every read that gives records to clients goes through ``open`` (``Replica.read_plain``):
JSON and binary fetches, push streams, gRPC, queue receives; replication and recovery never do.

Invariant: a sealed batch leaves the node only opened (its records decrypted, its checksum
recomputed) or not at all: a batch whose key is not in the ring, or whose tag fails, is
``UndecryptableBatchError`` naming the topic, partition and offset, never ciphertext taken for
records. A node without a ring leaves the bytes it reads untouched (no extra pass, no copy); the
decoders then refuse a sealed batch with the same error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Final, final

from coordinator.errors import InvalidTopicError
from coordinator.models import ENCRYPTION_CONFIG_KEY
from logbroker.errors import InvalidRequestError
from segments.batch import ATTRIBUTES_OFFSET, ENCRYPTED_FLAG, LENGTH_PREFIX_SIZE
from segments.encryption import LENGTH_OFFSET, NONCE_BYTES, open_batches, seal_batch
from segments.errors import UndecryptableBatchError
from segments.key_ring import KeyRing, KeyRingError, load_ring, parse_ring
from segments.log import LogSlice

# Batch headers a keyed node reads to tell that a fetched slice holds no sealed batch; a slice of
# more batches is read and opened instead of sent from the file.
HEADER_PEEKS_MAX: Final = 64
PEEK_BYTES: Final = ATTRIBUTES_OFFSET + 1


@final
class AtRest:
    __slots__ = ("_random", "ring")

    def __init__(self, ring: KeyRing | None, random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self.ring = ring
        self._random = random_bytes

    @classmethod
    def from_file(cls, path: str, text: str = "") -> AtRest:
        """The node's ring from ``encryption_keys_file`` or, failing that, the ring's ``text``
        (``encryption_keys``, from the environment); none when both are empty. A missing, unsafe
        or malformed ring is a configuration error that stops the start."""
        try:
            if path:
                return cls(load_ring(path))
            return cls(parse_ring(text, source="LOGBROKER_ENCRYPTION_KEYS") if text else None)
        except KeyRingError as exc:
            name = "encryption_keys_file" if path else "encryption_keys"
            raise InvalidRequestError(f"configuration: {name}: {exc}") from exc

    def wants(self, topic_config: Mapping[str, Any] | None) -> bool:
        """True when new batches of a topic with ``topic_config`` are to be sealed."""
        value = None if topic_config is None else topic_config.get(ENCRYPTION_CONFIG_KEY)
        return self.ring is not None if value is None else value == "on"

    def seal(self, batch: bytes) -> memoryview:
        """``batch`` sealed with the current key (the caller checked ``wants``)."""
        if self.ring is None:
            raise UndecryptableBatchError("this topic's batches are to be encrypted, but this node has no key ring "
                                          "(start it with --encryption-keys-file)")
        return memoryview(seal_batch(batch, self.ring, self._random(NONCE_BYTES)))

    def open(self, data: bytes | memoryview, topic: str, partition: int) -> bytes | bytearray | memoryview:
        """``data`` (whole batches read from a log) with its sealed batches opened; ``data`` itself
        when the node has no ring or none of them is sealed."""
        if self.ring is None:
            return data
        try:
            return open_batches(data, self.ring)
        except UndecryptableBatchError as exc:
            raise UndecryptableBatchError(f"partition {partition} of {topic!r}: {exc}", offset=exc.offset,
                                          key_id=exc.key_id) from None

    def slice_is_plain(self, piece: LogSlice) -> bool:
        """True when ``piece`` may be sent from the file as it is: its batch headers (at most
        ``HEADER_PEEKS_MAX`` of them, a small ``pread`` each) show no sealed batch. Then a keyed
        node keeps the zero-copy fetch for what it stored plain (decision 0319)."""
        position, end = piece.position, piece.position + piece.size_bytes
        for _ in range(HEADER_PEEKS_MAX):
            if position >= end:
                return True
            head = os.pread(piece.fd, PEEK_BYTES, position)
            if len(head) < PEEK_BYTES or head[ATTRIBUTES_OFFSET] & ENCRYPTED_FLAG:
                return False
            position += LENGTH_PREFIX_SIZE + int.from_bytes(head[LENGTH_OFFSET:LENGTH_OFFSET + 4], "little")
        return position >= end

    def check_topic_config(self, config: Mapping[str, Any]) -> None:
        """Refuse ``encryption: on`` on a node that could not seal (it has no ring)."""
        if config.get(ENCRYPTION_CONFIG_KEY) == "on" and self.ring is None:
            raise InvalidTopicError("config.encryption is on but this node has no key ring (start it with "
                                    "--encryption-keys-file)", field="config.encryption")
