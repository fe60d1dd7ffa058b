"""Who pays for a partition (pure: metadata in, counts out).

A user's resources cost more partitions than they name: a queue keeps a share-state log with (at
least) one partition per queue partition, an internal ``__`` topic without an owner, and its
dead-letter topic is a topic the user owns. So each partition is charged to a user: a topic's
(or queue's) to its owner, a queue's state log to the queue's owner. ``partitions_held`` is what
the per-user ``partitions_max`` compares with; ``payer_by_topic`` is how stored bytes are summed
per user (``logbroker.storage_quota``). Topics nobody owns (made with auth off, internal ones of
the node) are charged to no one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from coordinator.models import TopicMetadata
from logbroker.queues.manager import state_topic

INTERNAL_PREFIX: Final = "__"
DEAD_LETTER_PARTITIONS: Final = 1  # a dead-letter topic created with its queue has one partition


def payer_by_topic(topics: Iterable[TopicMetadata]) -> dict[str, str]:
    """Topic name -> the user its partitions are charged to (owned topics and queues, and the
    state logs of owned queues)."""
    payers: dict[str, str] = {}
    for meta in topics:
        if meta.owner is None or meta.name.startswith(INTERNAL_PREFIX):
            continue
        payers[meta.name] = meta.owner
        if meta.kind == "queue":
            payers[state_topic(meta)] = meta.owner
    return payers


def holdings(user: str, topics: Iterable[TopicMetadata]) -> tuple[int, int]:
    """The topics and queues ``user`` owns (internal ones left out) and every partition charged
    to them: their own and their queues' state partitions."""
    listed = list(topics)
    payers = payer_by_topic(listed)
    owned = sum(1 for meta in listed if meta.owner == user and not meta.name.startswith(INTERNAL_PREFIX))
    partitions = sum(meta.partitions for meta in listed if payers.get(meta.name) == user)
    return owned, partitions


def creation_cost(kind: object, partitions: int, *, new_dead_letter: bool) -> int:
    """The partitions creating a topic or queue of ``partitions`` adds: a queue's state log has
    as many again, and its dead-letter topic (when created with it) one more."""
    if kind != "queue":
        return partitions
    return 2 * partitions + (DEAD_LETTER_PARTITIONS if new_dead_letter else 0)


def growth_cost(kind: str, more: int) -> int:
    """The partitions growing a topic or queue by ``more`` adds (a queue's state log grows too)."""
    return 2 * more if kind == "queue" else more
