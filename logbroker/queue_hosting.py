"""Queue hosting: which queues this node manages, how one is opened, and where its dead letters
go. On a cluster a queue's partitions and its share-state log share one replica list and are
managed by the node that leads them all (decision 0198); the other nodes pass queue calls to it
(``routing.Router.locate(QueueTarget(name))`` finds it: the leader of its partition 0). A queue
is bound to its dead-letter topic by id (decision 0173).

Invariant: a node manages a cluster's queue exactly while it leads every partition of the queue
and of its state log with their logs open here, at the epochs it opened the queue under
(``QueueHosting.reconcile``, decision 0395); a dead letter is
appended only to the topic the queue is bound to, while the queue's owner may write to it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from coordinator.errors import UnknownTopicError
from coordinator.models import TopicMetadata, TopicSpec, dead_letter_id
from logbroker.errors import DeadLetterRefusedError, ForbiddenError, NoLeaderError
from logbroker.internal_log import ensure_internal_topic
from logbroker.queues.manager import state_topic
from logbroker.records import IncomingRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from coordinator.base import Coordinator
    from logbroker.auth.service import AuthService
    from logbroker.queues.manager import QueueManager
    from logbroker.replica_manager import ReplicaManager
    from logbroker.write_path import WritePath
    from segments.config import LogConfig

log = logging.getLogger(__name__)


def check_queue_managed(coordinator: Coordinator, name: str) -> None:
    """Refuse (retriably) a queue call for ``name`` when it is a cluster's queue this node does not
    manage now (the queue manager asks this when it does not hold the queue)."""
    meta = coordinator.cached_topic(name) if coordinator.is_cluster else None
    if meta is not None and meta.kind == "queue":
        raise NoLeaderError(f"queue {name!r} is not managed here now (its leadership is moving); retry")


class DeadLetters:
    """A queue's way to its dead-letter topic: takes the coordinator, auth (the owner's write
    permission) and the ``WritePath``."""

    def __init__(self, coordinator: Coordinator, auth: AuthService, writes: WritePath) -> None:
        self._coordinator = coordinator
        self._auth = auth
        self._writes = writes

    async def binding(self, queue: TopicMetadata) -> str | None:
        """The id of the topic ``queue``'s dead letters go to. A queue created before queues were
        bound by id is bound, for this run, to the topic its dead-letter name names now, if any
        (decision 0173): the owner's write permission is still checked at each dead-lettering."""
        bound = dead_letter_id(queue)
        if bound is not None:
            return bound
        name = TopicSpec(queue.name, queue.partitions, None, queue.kind, queue.config).queue_settings()
        try:
            return (await self._coordinator.get_topic(name["dead_letter_topic"])).topic_id
        except UnknownTopicError:
            return None

    async def produce(self, queue: str, topic: str, topic_id: str | None,
                                       records: list[IncomingRecord]) -> None:
        """Append a queue's dead letters to ``topic`` if it is still the topic the queue is bound to
        (``topic_id``) and the queue's owner may write to it now; ``DeadLetterRefusedError`` if not
        (the queue manager then withholds them, decision 0173)."""
        try:
            target: TopicMetadata | None = await self._coordinator.get_topic(topic)
        except UnknownTopicError:
            target = None
        if target is None or topic_id is None or target.topic_id != topic_id:
            replaced = ", and another topic of that name was created" if target is not None else ""
            raise DeadLetterRefusedError(f"the dead-letter topic {topic!r} the queue {queue!r} is bound to is gone "
                                         f"(deleted{replaced})", reason="gone")
        owner = (await self._coordinator.get_topic(queue)).owner
        try:
            await self._auth.authorize_owner(owner, topic, "write")
        except (ForbiddenError, UnknownTopicError) as exc:
            raise DeadLetterRefusedError(f"the owner of the queue {queue!r} may no longer write to its dead-letter "
                                         f"topic {topic!r}", reason="forbidden") from exc
        # A dead letter survives a failover; its bytes were the owner's already (no storage check),
        # and it keeps the timestamp its topic once accepted.
        await self._writes.produce_records(topic, records, "all", check_storage=False, timestamp_window=False)


class QueueHosting:
    """Takes this node's id, the coordinator, replicas, the queue manager, ``DeadLetters``, the base
    log config (a state log's), ``take_up_leaderships`` (the node's: an internal log is written
    at its leader epoch from the start) and ``led_epoch`` (the epoch this node leads a partition
    at now, None: it does not)."""

    def __init__(self, node_id: int, coordinator: Coordinator, replicas: ReplicaManager, queues: QueueManager,
                 dead_letters: DeadLetters, base_log_config: LogConfig,
                 take_up_leaderships: Callable[[str], None], led_epoch: Callable[[str, int], int | None]) -> None:
        self._node_id = node_id
        self._coordinator = coordinator
        self._replicas = replicas
        self._queues = queues
        self._dead_letters = dead_letters
        self._base_log_config = base_log_config
        self._take_up_leaderships = take_up_leaderships
        self._led_epoch = led_epoch
        self._opened_at: dict[str, dict[tuple[str, int], int | None]] = {}  # queue: its leaderships' epochs
        self._opening: dict[str, asyncio.Lock] = {}  # one open of a queue at a time (its replay yields)

    async def reconcile(self) -> None:
        """A cluster node manages exactly the queues whose partitions and state-log partitions it
        all leads (they share one replica list, so they fail over and back together): open those
        not open yet from their replicated state log, let go of the others. A queue opened under
        leaderships that have since changed (another node may have managed it in between) is let
        go and opened afresh from its log."""
        for meta in await self._coordinator.list_topics():
            if meta.kind != "queue":
                continue
            led = self.leads_queue(meta)
            if self._queues.has(meta.name) and (not led or not self._still_led(meta.name)):
                self._queues.remove(meta.name)
                self._opened_at.pop(meta.name, None)
                self._opening.pop(meta.name, None)
                log.info("no longer managing queue", extra={"fields": {"queue": meta.name}})
            if led and self._queues.has(meta.name):
                self._queues.reconfigure(meta)
            elif led:
                await self.open_queue(meta)
                log.info("managing queue", extra={"fields": {"queue": meta.name}})

    def _still_led(self, name: str) -> bool:
        """Every partition the queue was opened with is led at the epoch it was opened at (a
        partition added since is the growth's business)."""
        return self._held(self._opened_at.get(name, {}))

    def _held(self, epochs: dict[tuple[str, int], int | None]) -> bool:
        """Each of these leaderships is this node's at that epoch still."""
        return all(self._led_epoch(t, p) == epoch for (t, p), epoch in epochs.items())

    def leads_queue(self, meta: TopicMetadata) -> bool:
        me = self._node_id
        for topic in (meta.name, state_topic(meta)):
            for partition in range(meta.partitions):
                state = self._coordinator.cached_partition(topic, partition)
                if state is None or state.leader != me or not self._replicas.hosts(topic, partition):
                    return False
        return True

    def queue_replicas(self, name: str) -> tuple[int, ...] | None:
        """The replica list every partition of a cluster's queue shares (its state log's too)."""
        if not self._coordinator.is_cluster:
            return None
        state = self._coordinator.cached_partition(name, 0)
        return None if state is None else state.replicas

    async def open_queue(self, meta: TopicMetadata) -> None:
        """Open (creating it if needed) the queue's share-state log and replay it. The log has at
        least one partition per queue partition (it is grown first, see ``add_partitions``).

        The replay gives the loop back as it goes, so: one open of a queue runs at a time (a
        second caller finds the queue open and returns), and a cluster's queue is published only
        if every leadership it was opened under is still held at the epoch read before the replay
        (else ``NotLeaderError``; the next reconcile pass opens it afresh). Those epochs are what
        ``reconcile`` checks the queue against later."""
        lock = self._opening.setdefault(meta.name, asyncio.Lock())
        async with lock:
            if self._queues.has(meta.name):
                return
            flush = {k: v for k, v in meta.config.items() if k in ("flush", "flush_ms")}
            events = await ensure_internal_topic(self._coordinator, self._replicas, state_topic(meta),
                                                 meta.partitions, self._base_log_config, flush,
                                                 placed_on=self.queue_replicas(meta.name))
            epochs: dict[tuple[str, int], int | None] = {}
            if self._coordinator.is_cluster:
                self._take_up_leaderships(meta.name)
                self._take_up_leaderships(state_topic(meta))
                epochs = {(t, p): self._led_epoch(t, p) for t in (meta.name, state_topic(meta))
                          for p in range(meta.partitions)}
            await self._queues.open(meta, events, await self._dead_letters.binding(meta),
                                    still_led=lambda: self._held(epochs))
            self._opened_at[meta.name] = epochs
