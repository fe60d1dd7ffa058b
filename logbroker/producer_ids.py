"""Producer identities and the writer each belongs to (DESIGN §4, de-duplication).

A batch's ``(producer id, producer epoch, base sequence)`` names one write for de-duplication
(``logbroker.dedup``). Such an identity belongs to the authenticated user who made it, never to
whoever presents it next: a writer with a grant on another user's topic must not be able to
replay, block or answer as that user's writes (as Kafka scopes a producer id to the principal
that initialised it).

Layout of a producer id (63 bits, non-negative):

    bits 62..31  writer tag: 32 bits of a hash of the user's name (``writer_tag``)
    bits 30..0   serial: random for an issued id, a hash of the key for an ``Idempotency-Key``

- An **issued** identity (``issue``, ``POST /v1/producers``, Kafka's InitProducerId) carries the
  caller's tag, a random serial and a random epoch below ``KEY_EPOCH``: 46 random bits, so two
  producers of one user meet by chance about once in 2^45 pairs. Kafka's InitProducerId issues a
  **sequenced** one (an epoch from ``SEQUENCED_EPOCH_MIN``): its batches must follow each other
  without gaps in each partition (``logbroker.dedup``), as Kafka's broker holds its producers to.
- An **Idempotency-Key** write is built by the broker (``key_identity``) with the caller's tag,
  epoch ``KEY_EPOCH`` and 62 bits of a hash of the key spread over the serial and the base
  sequence: the same key of two users is two identities.
- A **prebuilt batch** is accepted with an identity only when its tag is the caller's and its
  epoch is not ``KEY_EPOCH`` (``check_writer``): one user cannot write under another's id, nor
  forge a key identity.

The tag is a plain hash, not a secret: knowing another user's tag does not help, since the check
compares it with the authenticated caller's. Two users whose names share a tag (1 pair in 2^32)
could replay each other's identities; names are chosen by admins (decision 0245).

Pure: no I/O; randomness comes in as an argument.
"""

from __future__ import annotations

import hashlib
import random
from typing import Final, NamedTuple

from logbroker.errors import ForbiddenError, InvalidRequestError
from segments.batch import NO_PRODUCER_ID, BatchHeader

KEY_EPOCH: Final = 32_767  # the producer epoch of a batch built for an Idempotency-Key
SEQUENCED_EPOCH_MIN: Final = 16_384  # epochs from here below KEY_EPOCH: a producer held to gapless sequences
SERIAL_BITS: Final = 31
SERIAL_MASK: Final = (1 << SERIAL_BITS) - 1
TAG_BITS: Final = 32
KEY_CHARS_MAX: Final = 200
_PERSON_TAG: Final = b"lb.writer"
_PERSON_KEY: Final = b"lb.idem-key"


class Identity(NamedTuple):
    """What a batch header carries for de-duplication."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def writer_tag(user: str) -> int:
    """The 32-bit tag of ``user``'s producer ids."""
    return int.from_bytes(hashlib.blake2b(user.encode(), digest_size=4, person=_PERSON_TAG).digest(), "big")


def writer_of(producer_id: int) -> int:
    """The writer tag a producer id carries."""
    return producer_id >> SERIAL_BITS


def issue(user: str, rng: random.Random, *, sequenced: bool = False) -> Identity:
    """A new producer identity for ``user``: its tag, a random serial and a random epoch below
    ``KEY_EPOCH`` (from ``SEQUENCED_EPOCH_MIN`` when ``sequenced``); the producer numbers its
    batches from sequence 0 per partition."""
    low, high = (SEQUENCED_EPOCH_MIN, KEY_EPOCH) if sequenced else (0, SEQUENCED_EPOCH_MIN)
    return Identity((writer_tag(user) << SERIAL_BITS) | rng.getrandbits(SERIAL_BITS), rng.randrange(low, high), 0)


def is_sequenced(key: Identity) -> bool:
    """Whether the identity's batches must follow each other without gaps (``issue``)."""
    return SEQUENCED_EPOCH_MIN <= key.producer_epoch < KEY_EPOCH


def check_idempotency_key(key: str) -> str:
    """An ``Idempotency-Key`` is 1 to ``KEY_CHARS_MAX`` printable ASCII characters."""
    if not 0 < len(key) <= KEY_CHARS_MAX or not all(" " < c <= "~" for c in key):
        raise InvalidRequestError(f"Idempotency-Key must be 1 to {KEY_CHARS_MAX} printable ASCII characters "
                                  "without spaces")
    return key


def key_identity(user: str, key: str) -> Identity:
    """The identity of the batches ``user`` writes with ``Idempotency-Key: key``."""
    digest = int.from_bytes(hashlib.blake2b(check_idempotency_key(key).encode(), digest_size=8,
                                            person=_PERSON_KEY).digest(), "big")
    return Identity((writer_tag(user) << SERIAL_BITS) | (digest & SERIAL_MASK), KEY_EPOCH,
                    (digest >> SERIAL_BITS) & SERIAL_MASK)


def check_writer(header: BatchHeader, user: str) -> None:
    """A prebuilt batch from ``user`` may carry no producer id, or one issued to ``user``
    (``ForbiddenError`` otherwise: nothing is stored)."""
    if header.producer_id == NO_PRODUCER_ID:
        return
    if header.producer_id < 0:
        raise InvalidRequestError(f"producer id {header.producer_id} is not valid: -1 (none) or an id from "
                                  "POST /v1/producers")
    if header.producer_epoch == KEY_EPOCH:
        raise ForbiddenError(f"producer epoch {KEY_EPOCH} is reserved for writes with an Idempotency-Key")
    if writer_of(header.producer_id) != writer_tag(user):
        raise ForbiddenError(f"producer id {header.producer_id} was not issued to {user!r}; ask POST /v1/producers "
                             "for one")
