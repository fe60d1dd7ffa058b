"""The produce path: records and prebuilt batches appended to the partitions this node leads,
and forwarded as built batches to the leaders of the others (``Node.writes``).

A request is checked whole before the first append: every batch built and within its
partition's size limit, every partition's leader known, the owner's storage quota, and every
partition led here past the one write gate (``partition_machine.check_append``, decision 0340)
in the same step as the appends, after the last await. So a request that fails on input, on a
partition without a leader or at the gate writes nothing to any partition. An idempotent batch
this partition stored within its de-duplication window is answered where it went, not stored
again (DESIGN §4).

Invariant: the order of the checks and appends is the one ``produce_records`` documents; nothing
is appended after an await that follows the write gate.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import msgspec

from coordinator.errors import InvalidTopicError
from coordinator.models import INTERNAL_PREFIX, TopicMetadata
from internal_rpc.frames import MESSAGE_BYTES_MAX
from internal_rpc.messages import ProduceRequest
from logbroker.dedup import WINDOW_KEY, WINDOW_MS_DEFAULT, Appended, identity
from logbroker.errors import (
    ANY_ERROR,
    BatchTooLargeError,
    ForwardOutcomeUnknownError,
    IdempotencyConflictError,
    InvalidRequestError,
    NoLeaderError,
    PartialWriteError,
)
from logbroker.partition_machine import PartitionState as MachineState
from logbroker.partition_machine import Phase, check_append, ms_of, solo
from logbroker.producer_ids import Identity, key_identity
from logbroker.records import IncomingRecord, group_by_partition
from logbroker.timestamps import TimestampWindow
from segments.batch import (
    ATTRIBUTES_OFFSET,
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    encode_batch,
    parse_header,
)
from segments.errors import InvalidBatchError
from segments.log import AppendInfo
from segments.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.at_rest import AtRest
    from logbroker.config import NodeConfig
    from logbroker.metrics import Metrics
    from logbroker.partition_moves import PartitionMover
    from logbroker.replica_manager import Replica, ReplicaManager
    from logbroker.replication.manager import ReplicationManager
    from logbroker.routing import Router
    from logbroker.storage_usage import StorageUsage
    from segments.config import LogConfig

Acks = Literal["0", "1", "all"]
ACKS: Final = ("0", "1", "all")
BACKGROUND_COMMITS_MAX: Final = 10_000
FORWARD_BATCH_BYTES_MAX: Final = MESSAGE_BYTES_MAX - 64 * 1024  # room for the call's other fields


class WritePath:
    """Takes the node's settings, its coordinator (cached metadata and the lease), replicas,
    ``Router``, replication (leaderships), the mover's freezes, the storage quota, metrics and
    encryption at rest, how a topic's log config is made, and ``check_serving`` (the node's
    readiness); never the node."""

    def __init__(self, config: NodeConfig, coordinator: Coordinator, replicas: ReplicaManager, router: Router,
                 replication: ReplicationManager, moves: PartitionMover, storage: StorageUsage, metrics: Metrics,
                 at_rest: AtRest, log_config: Callable[[TopicMetadata], LogConfig],
                 check_serving: Callable[[], None]) -> None:
        self._config = config
        self._node_id = config.node_id
        self._coordinator = coordinator
        self._replicas = replicas
        self._router = router
        self._replication = replication
        self._moves = moves
        self._storage = storage
        self._metrics = metrics
        self._at_rest = at_rest
        self._log_config = log_config
        self._check_serving = check_serving
        self._round_robin = itertools.count()  # spreads unkeyed records without an idempotency key
        self.background: set[asyncio.Task[None]] = set()  # acks=0 commits; the node's stop waits for them

    async def produce_records(self, topic: str, records: list[IncomingRecord], acks: str,
                              idempotency_key: str | None = None, *, writer: str | None = None,
                              check_storage: bool = True, timestamp_window: bool = True) -> list[dict[str, int]]:
        """Append records (grouped into one batch per partition); offsets in request order.
        Partitions another node leads are forwarded to it as built batches. An
        ``idempotency_key`` is the ``writer``'s (the authenticated user): the same key of two
        users names two writes (``producer_ids.key_identity``). The topic owner's storage quota
        is checked here, where the write enters (``logbroker.storage_usage``).

        Every batch is built and checked against its partition's size limit, every partition's
        leader is known, and every partition led here has passed the write gate (in the same step
        as the appends, after the last await), before the first append, so a request that fails on
        input (or on a partition without a leader, or one the gate refuses) writes nothing to any
        partition."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        if timestamp_window:  # records stamped too far from this node's clock are refused (decision 0221)
            self._timestamp_window(topic).check_all((r.record.timestamp for r in records), time.time_ns() // 1_000_000)
        if idempotency_key is None:
            producer_id, producer_epoch, sequence = NO_PRODUCER_ID, -1, NO_SEQUENCE
            groups = group_by_partition(records, self._router.partition_count(topic), next(self._round_robin),
                                        self._key_hash(topic))
        else:  # placed by the key, so that a retry lands where the first try did
            if writer is None:
                raise ValueError("an idempotency key belongs to a writer; name it")
            producer_id, producer_epoch, sequence = key_identity(writer, idempotency_key)
            groups = group_by_partition(records, self._router.partition_count(topic), producer_id,
                                        self._key_hash(topic))
        batches = []
        for partition, indexes in groups.items():
            batch = encode_batch([records[i].record for i in indexes], producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=sequence)
            limit = self._max_batch_bytes(topic, partition)
            if len(batch) > limit:
                raise BatchTooLargeError(len(batch), limit)
            leader = self._router.leader(topic, partition)
            if leader is None and self._coordinator.is_cluster:
                self._earlier_write(topic, self._replicas.get(topic, partition), batch)  # a conflict: nothing stored
            batches.append((partition, indexes, batch, leader))
        if check_storage:
            await self._check_storage(topic, [(partition, batch, leader) for partition, _, batch, leader in batches])
        for partition, _, _, leader in batches:  # the write gate, in the step that appends (no await between)
            if leader is None and self._coordinator.is_cluster:
                self._check_append(topic, partition, acks)
        offsets: list[dict[str, int]] = [{}] * len(records)
        commits = []
        forwards = []
        for partition, indexes, batch, leader in batches:
            if leader is not None:
                forwards.append((partition, indexes, self._forward_batch(leader, topic, partition, batch, acks)))
                continue
            replica = self._replicas.get(topic, partition)
            info = self._append_once(topic, replica, batch, len(indexes))
            for n, i in enumerate(indexes):
                offsets[i] = {"partition": partition, "offset": info.base_offset + n}
            commits.append(replica.commit_replicated(info) if acks == "all" else replica.commit(info))
        if not forwards:
            await self._await_commits(commits, acks)
            return offsets
        # Every forward runs to its end (its outcome known) before the request answers.
        committed, *outcomes = await asyncio.gather(self._await_commits(commits, acks), *(f for _, _, f in forwards),
                                                  return_exceptions=True)
        failures = [(partition, outcome) for (partition, _, _), outcome in zip(forwards, outcomes, strict=True)
                    if isinstance(outcome, BaseException)]
        for (partition, indexes, _), base in zip(forwards, outcomes, strict=True):
            if isinstance(base, int):
                for n, i in enumerate(indexes):
                    offsets[i] = {"partition": partition, "offset": base + n}
        if isinstance(committed, BaseException):
            failures.append((-1, committed))
        if not failures:
            return offsets
        if not commits and len(failures) == len(forwards):  # nothing was stored anywhere
            unknown = [exc for _, exc in failures if isinstance(exc, ForwardOutcomeUnknownError)]
            raise unknown[0] if unknown else failures[0][1]
        raise PartialWriteError(
            f"the records were stored on some partitions and not on others ({len(failures)} failed); "
            "resending the request would store the stored part again",
            results=[{"partition": p, "code": getattr(exc, "code", "error"), "detail": str(exc)}
                     for p, exc in failures] + [o for o in offsets if o])

    async def _forward_batch(self, leader: int, topic: str, partition: int, batch: bytes, acks: str) -> int:
        if len(batch) > FORWARD_BATCH_BYTES_MAX:
            raise BatchTooLargeError(len(batch), FORWARD_BATCH_BYTES_MAX)
        if self._router.peers().unreachable(leader):  # refused before sending: nothing can be stored twice
            raise NoLeaderError(f"node {leader}, the leader, did not answer lately; retry", node=leader)
        answer = await self._router.peers().call(leader, ProduceRequest(topic=topic, partition=partition,
                                                                 topic_id=self._router.topic_id(topic), batch=batch,
                                                                 acks=cast(Acks, acks)), idempotent=False)
        return answer.base_offset

    async def produce_batch(self, topic: str, partition: int, batch: bytes, acks: str, *,
                            on_appended: Callable[[], None] | None = None) -> list[dict[str, int]]:
        """Append one prebuilt batch as it is (the broker only validates and stamps it).
        ``on_appended`` is called once this node has appended it, before the wait that ``acks``
        asks for (never for a batch forwarded to the leader): a caller that appends in order may
        start the next batch then."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        leader = self._router.leader(topic, partition)
        await self._check_storage(topic, [(partition, batch, leader)])
        if leader is not None:
            base = await self._forward_batch(leader, topic, partition, batch, acks)
            return [{"partition": partition, "offset": base}]
        return await self._append_here(topic, partition, batch, acks, on_appended)

    def answers_at_append(self, topic: str, partition: int, acks: str) -> bool:
        """True when a produce of ``acks`` to ``partition`` is answered as soon as this node has
        appended it: the node holds the partition, its log is not fsynced before an answer
        (``flush`` other than ``always``) and no in-sync replica is waited for (``acks`` 0 or 1,
        or a single node). False when in doubt (a partition held elsewhere, an unknown one)."""
        if acks == "all" and self._coordinator.is_cluster:
            return False
        try:
            replica = self._replicas.get(topic, partition)
        except ANY_ERROR:
            return False
        if replica.in_cluster and replica.leader_hook is None:  # a follower here: the produce is forwarded
            return False
        return replica.log.config.flush != "always"

    async def _check_storage(self, topic: str, batches: list[tuple[int, bytes, int | None]]) -> None:
        """Refuse, before anything is stored or forwarded, batches that would take the topic's
        owner past their storage quota (``logbroker.storage_usage``). A batch this node's partition
        stored before (an idempotent retry, answered from the de-duplication window) costs nothing,
        so a retry of a write that was stored is answered as the first one was."""
        limited = await self._storage.limited(topic)
        if limited is None:
            return
        incoming = sum(len(batch) for partition, batch, leader in batches
                       if leader is not None or not self._stored_before(topic, partition, batch))
        self._storage.check(topic, limited, incoming)

    def _stored_before(self, topic: str, partition: int, batch: bytes) -> bool:
        return isinstance(self._earlier_write(topic, self._replicas.get(topic, partition), batch), Appended)

    async def produce_local_batch(self, topic: str, partition: int, batch: bytes, acks: str) -> list[dict[str, int]]:
        """Append a batch to a partition this node leads (a forwarded produce lands here)."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        self._router.check_leads(topic, partition)
        return await self._append_here(topic, partition, batch, acks)

    async def _append_here(self, topic: str, partition: int, batch: bytes, acks: str,
                           on_appended: Callable[[], None] | None = None) -> list[dict[str, int]]:
        self._check_append(topic, partition, acks)
        replica = self._replicas.get(topic, partition)
        info = self._append_once(topic, replica, batch, None)
        if on_appended is not None:
            on_appended()
        await self._await_commits([replica.commit_replicated(info) if acks == "all" else replica.commit(info)], acks)
        return [{"partition": partition, "offset": info.base_offset}]

    def _append_once(self, topic: str, replica: Replica, batch: bytes, records: int | None) -> AppendInfo:
        """Append ``batch``, or, when it is an idempotent batch this partition stored within its
        de-duplication window, append nothing and answer where the first one went (DESIGN §4).
        The same identity with another record count is ``idempotency_conflict``."""
        earlier = self._earlier_write(topic, replica, batch)
        if isinstance(earlier, Appended):
            self._metrics.count_duplicate(topic)
            return AppendInfo(earlier.base_offset, earlier.last_offset, earlier.last_offset + 1)
        info = replica.append(self._as_stored(topic, batch))
        if earlier is not None:
            assert replica.dedup is not None  # built by the lookup
            replica.dedup.record(earlier, info.base_offset, info.last_offset, time.time_ns() // 1_000_000)
        self._appended(topic, replica.partition)
        self._storage.appended(topic, len(batch))
        self._metrics.count_in(topic, len(batch),
                              records if records is not None else info.last_offset - info.base_offset + 1)
        return info

    def _as_stored(self, topic: str, batch: bytes) -> bytes | memoryview:
        """``batch`` as it is to be stored: sealed when the topic's ``encryption`` says so
        (decision 0316). A batch a client marked sealed is refused: only the node seals."""
        if len(batch) >= HEADER_SIZE and batch[ATTRIBUTES_OFFSET] & ENCRYPTED_FLAG:  # bit 6: the low byte
            raise InvalidBatchError("a produced batch cannot carry the encrypted-at-rest flag (attributes bit 6): "
                                    "the node encrypts")
        meta = self._coordinator.cached_topic(topic)
        return self._at_rest.seal(batch) if self._at_rest.wants(None if meta is None else meta.config) else batch

    def _earlier_write(self, topic: str, replica: Replica, batch: bytes) -> Appended | Identity | None:
        """Where the partition stored ``batch`` before (within its de-duplication window), or the
        batch's identity when it did not, or None for a batch without one. The same identity with
        another record count is ``idempotency_conflict``."""
        found = identity(parse_header(batch)) if len(batch) >= HEADER_SIZE else None
        if found is None:
            return None
        now = time.time_ns() // 1_000_000
        window = replica.dedup_window(self._dedup_window_ms(topic), now, self._config.dedup_entries_max)
        first = window.find(found, now)
        if first is None:
            window.check_sequence(found, now)
            return found
        count = parse_header(batch).record_count
        if count != first.records:
            raise IdempotencyConflictError(
                f"this idempotency key (or producer sequence) was used for {first.records} record(s) on partition "
                f"{replica.partition}, not {count}; nothing was stored", partition=replica.partition)
        return first

    def check_timestamps(self, topic: str, low: int, high: int) -> None:
        """Refuse (``invalid_timestamp``) records stamped ``low`` to ``high`` that lie outside the
        window ``topic`` accepts around this node's clock (decision 0221)."""
        self._timestamp_window(topic).check(low, high, time.time_ns() // 1_000_000)

    def _timestamp_window(self, topic: str) -> TimestampWindow:
        meta = self._coordinator.cached_topic(topic)
        return TimestampWindow.of({} if meta is None else meta.config)

    def _key_hash(self, topic: str) -> str:
        """The topic's ``key_hash`` (``segments.partitioning``): where its keyed records go."""
        meta = self._coordinator.cached_topic(topic)
        value = None if meta is None else meta.config.get(KEY_HASH_KEY)
        return value if isinstance(value, str) else DEFAULT_KEY_HASH

    def _dedup_window_ms(self, topic: str) -> int:
        meta = self._coordinator.cached_topic(topic)
        value = None if meta is None else meta.config.get(WINDOW_KEY)
        return value if isinstance(value, int) and not isinstance(value, bool) else WINDOW_MS_DEFAULT

    def _check_append(self, topic: str, partition: int, acks: str) -> None:
        """The one write gate (decision 0340): ``partition_machine.check_append`` over the state of
        a partition this node serves, read from its leadership, its lease and a move's freeze.
        ``not_leader`` (not leading it now, a lapsed lease: DESIGN §5 fencing, a freeze, a hand-over),
        ``not_enough_replicas`` under ``min_insync_replicas`` for ``acks=all``; nothing is stored
        when it refuses. Checked on the write path itself, after any pause."""
        now_ms = time.monotonic_ns() // 1_000_000
        frozen_until_ms = self._moves.frozen_until_ms(topic, partition, now_ms)
        if not self._coordinator.is_cluster:
            state = solo(topic, partition, self._node_id, self._replicas.get(topic, partition).log.log_end_offset)
            if frozen_until_ms is not None:
                state = msgspec.structs.replace(state, phase=Phase.FROZEN, frozen_until_ms=frozen_until_ms)
        else:
            lease_until_ms = ms_of(self._coordinator.lease_valid_until())
            leadership = self._replication.leadership(topic, partition)
            state = (MachineState(topic, partition, self._node_id, lease_until_ms=lease_until_ms)
                     if leadership is None else leadership.machine_state(lease_until_ms, frozen_until_ms))
        error = check_append(state, acks, now_ms)
        if error is not None:
            raise error

    def _appended(self, topic: str, partition: int) -> None:
        if self._coordinator.is_cluster:
            leadership = self._replication.leadership(topic, partition)
            if leadership is not None:
                self._replication.appended(leadership)

    async def _await_commits(self, commits: list[Any], acks: str) -> None:
        if acks != "0":
            if len(commits) == 1:  # one partition: no task and gathering future for it
                await commits[0]
            else:
                await asyncio.gather(*commits)
            return
        if len(self.background) + len(commits) > BACKGROUND_COMMITS_MAX:
            await asyncio.gather(*commits)
            return
        for commit in commits:
            task = asyncio.ensure_future(commit)
            self.background.add(task)
            task.add_done_callback(self.background.discard)

    def _max_batch_bytes(self, topic: str, partition: int) -> int:
        if self._replicas.hosts(topic, partition):
            return self._replicas.get(topic, partition).log.config.max_batch_bytes
        return self._log_config(self._router.cached_meta(topic)).max_batch_bytes


def _check_acks(acks: str) -> None:
    if acks not in ACKS:
        raise InvalidRequestError(f"acks must be 0, 1 or all, not {acks!r}")


def _check_writable(topic: str) -> None:
    """Internal topics hold the broker's own state (offsets, queue deliveries): only it writes them."""
    if topic.startswith(INTERNAL_PREFIX):
        raise InvalidTopicError(f"{topic!r} is internal: only the broker writes to it")
