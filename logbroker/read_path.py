"""The read path: fetches, offsets and partition figures (``Node.reads``). A partition this node
leads is read here; another's is read from its leader over the internal RPC, or, when it has no
leader or its leader does not answer, from an in-sync replica up to the high watermark that
replica knows (DESIGN §6 read fallback); a reader that names its rack may be served by the in-sync
replica in that rack (KIP-392). The calls other nodes forward here (``fetch_local``,
``fetch_replica``, ``list_local_offset``, ``local_figures``) are served only from this node's own
copy, never forwarded again.

Invariant: a read returns whole batches below the high watermark of the copy it was served from;
a long-poll is capped by the node's ``fetch_wait_ms_max`` and releases every waiter it made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Final

from coordinator.models import PartitionState
from internal_rpc.messages import FetchRequest, ListOffsetRequest, PartitionFiguresRequest
from logbroker.errors import ANY_ERROR, BrokerError, InvalidRequestError, NoLeaderError, RemoteError
from logbroker.partition_roles import NO_LEADER
from logbroker.partition_state import rack_replica
from segments.log import LogRead, LogSlice

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.at_rest import AtRest
    from logbroker.config import NodeConfig
    from logbroker.metrics import Metrics
    from logbroker.replica_manager import ReplicaManager
    from logbroker.routing import Router

log = logging.getLogger(__name__)
FORWARD_WAIT_MARGIN_S: Final = 3.0  # a forwarded fetch's deadline: its wait plus this
REMOTE_POLL_MS: Final = 500
FIGURES_DEADLINE_S: Final = 2.0


class ReadPath:
    """Takes the node's settings (its id, rack and fetch bounds), its coordinator (the cache),
    replicas, ``Router``, metrics, encryption at rest and ``check_serving`` (the node's
    readiness); never the node."""

    def __init__(self, config: NodeConfig, coordinator: Coordinator, replicas: ReplicaManager, router: Router,
                 metrics: Metrics, at_rest: AtRest, check_serving: Callable[[], None]) -> None:
        self._config = config
        self._node_id = config.node_id
        self._coordinator = coordinator
        self._replicas = replicas
        self._router = router
        self._metrics = metrics
        self._at_rest = at_rest
        self._check_serving = check_serving

    def _fetch_args(self, max_bytes: int, wait_ms: int) -> tuple[int, int]:
        return min(max_bytes, self._config.fetch_bytes_max), min(max(wait_ms, 0), self._config.fetch_wait_ms_max)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int,
                    wait_ms: int, *, client_rack: str | None = None) -> tuple[LogRead, int]:
        """Whole batches from ``offset`` below the high watermark (long-polls at the end); from
        the leader when another node leads the partition, or from an in-sync replica in the
        reader's ``client_rack`` when there is one (``_fetch_in_rack``)."""
        self._check_serving()
        if client_rack:
            near = await self._fetch_in_rack(topic, partition, offset, max_bytes, wait_ms, client_rack)
            if near is not None:
                return near
        remote = await self._fetch_elsewhere(topic, partition, offset, max_bytes, wait_ms)
        if remote is not None:
            return remote
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    async def _fetch_elsewhere(self, topic: str, partition: int, offset: int, max_bytes: int,
                               wait_ms: int) -> tuple[LogRead, int] | None:
        """A fetch of a partition another node leads, from that leader; when it has no leader now
        or its leader cannot be reached, from an in-sync replica up to the high watermark that
        replica knows (DESIGN §6 read fallback). None when this node leads the partition."""
        try:
            leader = self._router.leader(topic, partition)
        except NoLeaderError as exc:
            return await self._fetch_from_replica(topic, partition, offset, max_bytes, wait_ms, None, exc)
        if leader is None:
            return None
        if self._router.peers().unreachable(leader):
            failure = NoLeaderError(f"node {leader}, the leader, did not answer lately", node=leader)
        else:
            try:
                return await self._fetch_remote(leader, topic, partition, offset, max_bytes, wait_ms)
            except NoLeaderError as exc:  # not answered: the leader is down, paused or cut off
                failure = exc
        return await self._fetch_from_replica(topic, partition, offset, max_bytes, wait_ms, leader, failure)

    async def _fetch_from_replica(self, topic: str, partition: int, offset: int, max_bytes: int, wait_ms: int,
                                  leader: int | None, failure: BrokerError) -> tuple[LogRead, int]:
        state = self._coordinator.cached_partition(topic, partition)
        if state is None:
            raise failure
        me = self._node_id
        for node_id in sorted((n for n in state.isr if n != leader), key=lambda n: n != me):
            if node_id == me:
                if self._replicas.hosts(topic, partition):
                    return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)
                continue
            if self._coordinator.cached_node(node_id) is None:
                continue
            try:
                return await self._fetch_remote(node_id, topic, partition, offset, max_bytes, wait_ms, replica=True)
            except NoLeaderError:
                continue
        raise failure

    async def fetch_replica(self, topic: str, partition: int, offset: int, max_bytes: int,
                            wait_ms: int) -> tuple[LogRead, int]:
        """A fetch another node sent here because the leader could not serve it: served from
        this node's in-sync copy, up to its high watermark."""
        self._check_serving()
        if not self._serves_copy(topic, partition, offset):
            raise NoLeaderError(f"node {self._node_id} holds no in-sync copy of partition {partition} "
                                f"of {topic!r} up to offset {offset}")
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    def _serves_copy(self, topic: str, partition: int, offset: int) -> bool:
        """True when this node's copy of the partition is in sync and exposes ``offset`` (at most
        its high watermark, where a read waits): past that only the leader can answer."""
        state = self._coordinator.cached_partition(topic, partition)
        if state is None or self._node_id not in state.isr or not self._replicas.hosts(topic, partition):
            return False
        replica = self._replicas.get(topic, partition)
        return replica.log.log_start_offset <= offset <= replica.high_watermark

    async def _fetch_in_rack(self, topic: str, partition: int, offset: int, max_bytes: int, wait_ms: int,
                             client_rack: str) -> tuple[LogRead, int] | None:
        """A read served by the in-sync replica in the reader's rack (``partition_state.rack_replica``):
        this node's copy, or another's over internal RPC. None — read as usual, from the leader —
        when the rack has no such replica, it is the leader, or it cannot serve ``offset`` now."""
        state = self._coordinator.cached_partition(topic, partition) if self._coordinator.is_cluster else None
        if state is None or state.leader == NO_LEADER:
            return None
        me = self._node_id
        target = rack_replica(state.isr, state.leader, self._isr_racks(state.isr), client_rack, me)
        if target is None or target == state.leader:
            return None
        if target == me:
            if not self._serves_copy(topic, partition, offset):
                return None
            return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)
        if self._router.peers().unreachable(target):
            return None
        try:
            return await self._fetch_remote(target, topic, partition, offset, max_bytes, wait_ms, replica=True)
        except (NoLeaderError, RemoteError):
            return None

    def _isr_racks(self, isr: Collection[int]) -> dict[int, str | None]:
        me = self._node_id
        racks = {n: (info.rack if info is not None else None)
                 for n, info in ((n, self._coordinator.cached_node(n) if n != me else None) for n in isr)}
        racks[me] = self._config.rack or None
        return racks

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str | None) -> int | None:
        """The node a reader in ``client_rack`` should fetch from instead of this one, Kafka's
        ``preferred_read_replica`` (KIP-392): the in-sync replica ``partition_state.rack_replica``
        names, when that is another node; None to read here (this node is it, no replica is in the
        rack, or the partition has no leader now)."""
        coordinator = self._coordinator
        state = coordinator.cached_partition(topic, partition) if coordinator.is_cluster and client_rack else None
        if state is None or state.leader == NO_LEADER:
            return None
        me = self._node_id
        target = rack_replica(state.isr, state.leader, self._isr_racks(state.isr), client_rack, me)
        return None if target is None or target == me or self._router.peers().unreachable(target) else target

    async def fetch_local(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int) -> tuple[LogRead, int]:
        """A fetch forwarded here: served only if this node leads the partition."""
        self._check_serving()
        self._router.check_leads(topic, partition)
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    async def _fetch_here(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int) -> tuple[LogRead, int]:
        replica = self._replicas.get(topic, partition)
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        if wait_ms and offset == replica.high_watermark:  # a tail that caught up: nothing to read yet
            await replica.wait_for_data(offset, wait_ms)
            wait_ms = 0
        result = self._replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
        if not result.data and wait_ms:
            await replica.wait_for_data(offset, wait_ms)
            result = self._replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
        if result.data:
            self._metrics.count_out(topic, len(result.data), result.next_offset - max(offset, result.first_offset))
        return result, replica.high_watermark

    async def _fetch_remote(self, leader: int, topic: str, partition: int, offset: int, max_bytes: int,
                            wait_ms: int, *, replica: bool = False) -> tuple[LogRead, int]:
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        answer = await self._router.peers().call(
            leader, FetchRequest(topic=topic, topic_id=self._router.topic_id(topic), partition=partition,
                                 offset=offset, max_bytes=max_bytes, wait_ms=wait_ms, replica=replica),
            deadline_s=wait_ms / 1000 + FORWARD_WAIT_MARGIN_S)
        return LogRead(memoryview(answer.data), answer.first_offset, answer.next_offset), answer.high_watermark

    async def fetch_slice(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int, *, client_rack: str | None = None) -> tuple[LogSlice | LogRead | None, int]:
        """Like ``fetch`` but a ``LogSlice`` for zero-copy sending when this node leads the
        partition (None when empty); the bytes a leader sent (a ``LogRead``) when another does."""
        self._check_serving()
        if client_rack:
            near = await self._fetch_in_rack(topic, partition, offset, max_bytes, wait_ms, client_rack)
            if near is not None:
                result, hwm = near
                return (result if result.data else None), hwm
        remote = await self._fetch_elsewhere(topic, partition, offset, max_bytes, wait_ms)
        if remote is not None:
            result, hwm = remote
            return (result if result.data else None), hwm
        replica = self._replicas.get(topic, partition)
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        piece = replica.log.slice(offset, max_bytes, offset_max=replica.high_watermark)
        if piece is None and wait_ms:
            await replica.wait_for_data(offset, wait_ms)
            piece = replica.log.slice(offset, max_bytes, offset_max=replica.high_watermark)
        if piece is not None and self._at_rest.ring is not None and not self._at_rest.slice_is_plain(piece):
            piece.close()  # sealed batches are opened, so they are read, not sent from the file
            result = self._replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
            self._metrics.bytes_out.labels(topic).inc(len(result.data))
            return (result if result.data else None), replica.high_watermark
        if piece is not None:
            self._metrics.count_out(topic, piece.size_bytes, piece.next_offset - max(offset, piece.first_offset))
        return piece, replica.high_watermark

    async def wait_for_any(self, positions: list[tuple[str, int, int]], wait_ms: int) -> None:
        """Return once one of ``(topic, partition, offset)`` has data at its offset, or after
        ``wait_ms`` (capped like a fetch's long-poll). Positions led by other nodes are not
        waited on: the wait is then cut to ``REMOTE_POLL_MS`` so that the caller polls them."""
        self._check_serving()
        _, wait_ms = self._fetch_args(0, wait_ms)
        local = [(t, p, o) for t, p, o in positions if self._serves_here(t, p)]
        if len(local) < len(positions):
            wait_ms = min(wait_ms, REMOTE_POLL_MS)
        waits = [asyncio.ensure_future(self._replicas.get(t, p).wait_for_data(o, wait_ms)) for t, p, o in local]
        if not waits:
            await asyncio.sleep(wait_ms / 1000)
            return
        try:
            await asyncio.wait(waits, timeout=wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the caller is cancelled (its client went): no waiter outlives it
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def leader_elsewhere(self, topic: str, partition: int) -> int | None:
        """The partition's leader when it is another node (a hint for clients that sent a call
        here: they read the metadata again), else None."""
        if not self._coordinator.is_cluster:
            return None
        state = self._coordinator.cached_partition(topic, partition)
        if state is None or state.leader in (NO_LEADER, self._node_id):
            return None
        return state.leader

    def _serves_here(self, topic: str, partition: int) -> bool:
        """This node leads ``partition`` now (False while it has no leader: the caller polls)."""
        try:
            return self._router.leader(topic, partition) is None
        except NoLeaderError:
            return False

    def local_high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark of a partition this node serves; None when another node does (or
        none does now)."""
        try:
            if self._router.leader(topic, partition) is None:
                return self._replicas.get(topic, partition).high_watermark
        except NoLeaderError:
            pass
        return None

    async def list_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        """``earliest``, ``latest`` (the high watermark) or the first offset at a timestamp."""
        self._check_serving()
        leader = self._router.leader(topic, partition)
        if leader is None:
            return self._offset_here(topic, partition, at)
        answer = await self._router.peers().call(leader, ListOffsetRequest(topic=topic, partition=partition, at=at))
        return {"partition": partition, "offset": answer.offset}

    def list_local_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        """An offsets call forwarded here: answered only if this node leads the partition."""
        self._check_serving()
        self._router.check_leads(topic, partition)
        return self._offset_here(topic, partition, at)

    def _offset_here(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        replica = self._replicas.get(topic, partition)
        if at == "earliest":
            offset: int | None = replica.log.log_start_offset
        elif at == "latest":
            offset = replica.high_watermark
        else:
            try:
                timestamp = int(at)
            except ValueError as exc:
                raise InvalidRequestError("at must be earliest, latest or a timestamp in ms") from exc
            found = replica.log.offset_for_timestamp(timestamp)
            offset = replica.high_watermark if found is None else min(found, replica.high_watermark)
        return {"partition": partition, "offset": offset}

    def local_figures(self, topic: str, partitions: list[int]) -> dict[int, dict[str, float]]:
        """Offsets and size of the partitions of ``topic`` this node leads (for describe), and
        the dirty ratio and last compaction of a compacted topic's."""
        figures: dict[int, dict[str, float]] = {}
        for partition in partitions:
            if self._router.leader(topic, partition) is None and self._replicas.hosts(topic, partition):
                replica = self._replicas.get(topic, partition)
                figures[partition] = {
                    "earliest_offset": replica.log.log_start_offset, "latest_offset": replica.high_watermark,
                    "log_end_offset": replica.log.log_end_offset, "size_bytes": replica.log.size_bytes}
                if replica.log.config.compacts and not topic.startswith("__"):
                    status = self._replicas.compactor.status.get((topic, partition))
                    figures[partition]["dirty_ratio"] = round(replica.log.dirty_ratio(), 4)
                    figures[partition]["last_compaction_ms"] = 0 if status is None else status.last_ms
        return figures

    async def partition_figures(self, topic: str, states: list[PartitionState]) -> dict[int, dict[str, float]]:
        """Offsets and size of every partition: local ones from the logs, the others from their
        leaders (one call per leader, bounded; a leader that does not answer leaves nulls)."""
        by_leader: dict[int, list[int]] = {}
        for state in states:
            by_leader.setdefault(state.leader, []).append(state.partition)
        figures = self.local_figures(topic, by_leader.pop(self._node_id, []) if self._coordinator.is_cluster
                                     else [s.partition for s in states])
        by_leader.pop(NO_LEADER, None)
        if not by_leader or not self._router.has_peers():
            return figures

        async def ask(leader: int, partitions: list[int]) -> None:
            try:
                answer = await self._router.peers().call(
                    leader, PartitionFiguresRequest(topic=topic, partitions=partitions), deadline_s=FIGURES_DEADLINE_S)
            except ANY_ERROR as exc:
                log.info("partition figures unavailable", extra={"fields": {"node": leader, "error": str(exc)}})
                return
            for key, value in answer.figures.items():
                if key in partitions:
                    figures[key] = value

        await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
        return figures
