"""What each Kafka API does, on the broker's own paths: Produce and Fetch through the front door
(``logbroker.api.BrokerApi``: authorization, quotas, acks, the charge, forwarding to the leader),
Metadata from the coordinator's placement, SASL against LogBroker's users.

Each handler takes the connection's ``Session`` and the decoded request and returns the response
as one dict of values, spelled as the newest version it serves (``kafka_api.entities.build``
keeps what the request's version carries), or None when the request gets no response (Produce
with ``acks=0``). A LogBroker error becomes its Kafka error code through the one error table
(``logbroker.error_codes``), per partition where Kafka answers per partition."""

from __future__ import annotations

import asyncio
import functools
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Final, TypeVar

from coordinator.base import Coordinator
from coordinator.models import TopicMetadata
from kafka_api import record_batch, sasl, topic_ids, wire
from kafka_api.admin import AdminHandlers, live_brokers
from kafka_api.apis import advertised
from kafka_api.entities import BodyError
from kafka_api.groups import GroupHandlers
from kafka_api.session import Session, error_code
from kafka_api.stored_batches import kafka_batches, stored_batch
from kafka_api.topic_ids import ZERO_UUID, topic_uuid
from logbroker.api import BrokerApi
from logbroker.api_types import Answered, CallContext, Prebuilt
from logbroker.batch_limits import LOOP_CHECK_BYTES_MAX
from logbroker.errors import ANY_ERROR, InvalidRequestError, TooManyRequestsError
from logbroker.kafka_error_numbers import (
    FENCED_LEADER_EPOCH,
    ILLEGAL_SASL_STATE,
    INVALID_REQUEST,
    INVALID_REQUIRED_ACKS,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    SASL_AUTHENTICATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_SASL_MECHANISM,
)
from logbroker.node import Node
from logbroker.producer_ids import issue
from segments.log import LogRead

NO_OPERATIONS: Final = -(2**31)  # authorized operations not asked for
ACKS: Final = {0: "0", 1: "1", -1: "all"}
LATEST, EARLIEST = -1, -2
NOT_LEADER_CODES: Final = frozenset({NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH})
FETCH_BY_ID_VERSION: Final = 13  # Fetch names topics by id from this version on (KIP-516)
PARTITIONS_PER_REQUEST_MAX: Final = 1_000  # partitions (or topics) one request may name; more closes it
_PRODUCER_RNG: Final = random.SystemRandom()
# A Produce refused by the caller's quota is tried again after the wait the refusal names, at most
# this many times and within the request's own timeout, capped here (a Fetch waits its debt out
# first, at most THROTTLE_WAIT_MAX_S too).
THROTTLED_TRIES_MAX: Final = 20
THROTTLE_WAIT_MAX_S: Final = 30.0
THROTTLE_PAUSE_MIN_S: Final = 0.005
TIMER_SLACK_S: Final = 0.001  # the event loop's timers keep whole milliseconds and may fire up to one early
CHECK_THREADS: Final = 2  # threads checking compressed or large Produce batches (one request per connection at a time)
ATTRIBUTES_LOW_BYTE: Final = 22  # of a Kafka batch: its attributes are bytes 21-22, big-endian
T = TypeVar("T")


class Throttle:
    """How long one request was held back by its caller's quotas: its ``throttle_time_ms``.

    Kafka slows a client over its quota (the answer carries the delay, KIP-219), it does not fail
    it: a failed Produce is records a client may drop. So a call the quota refuses waits the time
    the refusal names and is tried again, within ``deadline``; only past it does the refusal stand
    (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, wait_s: float) -> None:
        self.deadline = time.monotonic() + min(max(0.0, wait_s), THROTTLE_WAIT_MAX_S)
        self.waited_s = 0.0

    @property
    def ms(self) -> int:
        return round(self.waited_s * 1000)

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        for _ in range(THROTTLED_TRIES_MAX):
            try:
                return await attempt()
            except TooManyRequestsError as exc:
                pause = min(max(exc.retry_after_s, THROTTLE_PAUSE_MIN_S), self.deadline - time.monotonic())
                if pause <= 0:
                    raise
                await asyncio.sleep(pause)
                self.waited_s += pause
        return await attempt()


class _Records:
    """A Produce partition's Kafka batch as the front door's ``Payload``: stored as it was sent
    (``kafka_api.stored_batches``), with its producer id, epoch and base sequence when the Kafka
    producer is idempotent (so a retried batch is stored once, ``logbroker.dedup``)."""

    def __init__(self, partition: int, records: bytes, budget: list[int], checks: Executor) -> None:
        self.partition = partition
        self.records = records
        self._budget = budget  # the bytes the request's batches may still unpack to, shared by its partitions
        self._checks = checks
        self._decoded: Prebuilt | None = None  # kept: a call tried again after a quota wait decodes once

    def received_bytes(self) -> int:
        return len(self.records)

    async def decode(self) -> Prebuilt:
        if self._decoded is None:
            if not self.records:
                raise InvalidRequestError("a produce request names a partition without records")
            check = functools.partial(stored_batch, self.records, bytes_max=max(0, self._budget[0]))
            if len(self.records) > LOOP_CHECK_BYTES_MAX or _compressed(self.records):
                batch, checked, unpacked = await asyncio.get_running_loop().run_in_executor(self._checks, check)
            else:  # small and plain: cheaper on the loop than a hand-over to a thread (decision 0251)
                batch, checked, unpacked = check()
            self._budget[0] -= unpacked
            self._decoded = Prebuilt(self.partition, batch, checked)
        return self._decoded


def _compressed(records: bytes) -> bool:
    """Whether the Kafka batch in ``records`` names a codec (attributes' low byte, offset 22)."""
    return len(records) > ATTRIBUTES_LOW_BYTE and bool(records[ATTRIBUTES_LOW_BYTE] & 0x07)


class KafkaHandlers:
    def __init__(self, node: Node, api: BrokerApi) -> None:
        self.node = node
        self.api = api
        # Checking a compressed or large batch decodes it: off the event loop, as HTTP does (0220).
        self.checks = ThreadPoolExecutor(max_workers=CHECK_THREADS, thread_name_prefix="logbroker-kafka-check")
        self.groups = GroupHandlers(node, api)
        self.admin = AdminHandlers(node, api)

    # ---- before authentication -------------------------------------------------------------

    async def api_versions(self, session: Session, request: Any) -> dict[str, Any]:
        return {"error_code": NONE, "api_keys": advertised(), "throttle_time": 0}

    async def sasl_handshake(self, session: Session, request: Any) -> dict[str, Any]:
        """Before login, or to re-authenticate an authenticated connection (KIP-368, v1 only: after
        v0 the next frame would be a bare SASL message)."""
        mechanism = str(request.mechanism)
        legacy = type(request).__version__ == 0
        if mechanism not in sasl.MECHANISMS:
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(sasl.MECHANISMS)}
        if legacy and session.principal is not None:
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": list(sasl.MECHANISMS)}
        session.mechanism = mechanism
        session.unframed_sasl = legacy
        return {"error_code": NONE, "mechanisms": list(sasl.MECHANISMS)}

    async def sasl_authenticate(self, session: Session, request: Any) -> dict[str, Any]:
        return await self.authenticate(session, bytes(request.auth_bytes))

    async def authenticate(self, session: Session, message: bytes) -> dict[str, Any]:
        """SaslAuthenticate's answer to ``message`` (also the bare message after a v0 handshake):
        one per handshake. A token's session lasts until the token expires (``session_lifetime``,
        which Kafka clients re-authenticate before); a password's is rechecked instead
        (``access_recheck_ms``). Re-authentication must name the same user."""
        session.unframed_sasl = False
        mechanism, session.mechanism = session.mechanism, None
        if mechanism is None:
            session.failed = True
            return {"error_code": ILLEGAL_SASL_STATE, "error_message": "SaslHandshake first, for each SaslAuthenticate",
                    "auth_bytes": b""}
        auth = self.node.auth
        try:
            proof = sasl.parse(mechanism, message)
            expires_at: float | None = None
            if isinstance(proof, sasl.Password):
                caller = await auth.authenticate_password(proof.username, proof.password, session.address)
            else:
                caller = await auth.authenticate(f"Bearer {proof.token}")
                expires_at = float(auth.token_expires_at(proof.token)) if auth.enabled else None
        except (sasl.SaslError, *ANY_ERROR) as exc:
            session.failed = True
            return {"error_code": SASL_AUTHENTICATION_FAILED, "error_message": str(exc)[:200], "auth_bytes": b""}
        if session.principal is not None and caller[0].name != session.principal.name:
            session.failed = True
            return {"error_code": SASL_AUTHENTICATION_FAILED, "auth_bytes": b"",
                    "error_message": "re-authentication must name the connection's user"}
        session.principal, session.limits = caller
        session.expires_at = expires_at
        if auth.enabled:
            user = await auth.user(caller[0].name)
            session.credential_version, session.user_id = user.credential_version, user.user_id
        lifetime_ms = 0 if expires_at is None else max(1, int((expires_at - time.time()) * 1000))
        return {"error_code": NONE, "error_message": None, "auth_bytes": b"", "session_lifetime": lifetime_ms}

    # ---- metadata ----------------------------------------------------------------------------

    async def metadata(self, session: Session, request: Any) -> dict[str, Any]:
        node, ctx = self.node, session.context()
        brokers = await live_brokers(node)
        topics = []
        if request.topics is None:  # every topic the caller may see
            visible = await node.auth.visible(ctx.principal, await node.coordinator.list_topics())
            for meta in visible:
                if meta.kind == "topic":
                    topics.append(await self._topic_metadata(meta))
        else:
            if len(request.topics) > PARTITIONS_PER_REQUEST_MAX:
                raise BodyError(f"a Metadata request naming more than {PARTITIONS_PER_REQUEST_MAX} topics")
            create = bool(getattr(request, "allow_auto_topic_creation", False))
            for wanted in request.topics:
                if wanted.name is None:  # v10+: named by id alone
                    topics.append(await self._topic_by_id(ctx, getattr(wanted, "topic_id", None)))
                else:
                    topics.append(await self._named_topic(ctx, str(wanted.name), create=create))
        return {"throttle_time": 0, "brokers": brokers, "cluster_id": node.config.cluster_name,
                "controller_id": node.config.node_id, "topics": topics}

    async def _named_topic(self, ctx: CallContext, name: str, *, create: bool) -> dict[str, Any]:
        """A topic the request names; with ``create`` (a producer's Metadata asks for it) and the
        node's ``auto_create`` on, a missing one is made on first use, as a write would make it."""
        try:
            if create:
                await self.api.create_on_first_use(ctx, name)
            await self.api.authorize(ctx, name, "describe")
            meta = await self.node.coordinator.get_topic(name)
        except ANY_ERROR as exc:
            return _topic_error(name, error_code(exc))
        if meta.kind != "topic":
            return _topic_error(name, UNKNOWN_TOPIC_OR_PARTITION)
        return await self._topic_metadata(meta)

    async def _topic_by_id(self, ctx: CallContext, topic_id: uuid.UUID | None) -> dict[str, Any]:
        """A topic the request names by id: as by its name, except that an id no live topic has,
        or whose topic the caller may not describe, is UNKNOWN_TOPIC_ID with no name
        (``kafka_api.topic_ids``)."""
        meta = topic_ids.resolve(self.node.coordinator, topic_id)
        answer = None if meta is None else await self._named_topic(ctx, meta.name, create=False)
        hidden = (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION)
        if answer is None or answer["error_code"] in hidden \
                or answer["topic_id"] != topic_id:  # (deleted, or made again under its name, meanwhile)
            return {**_topic_error(None, UNKNOWN_TOPIC_ID), "topic_id": topic_id or ZERO_UUID}
        return answer

    async def _topic_metadata(self, meta: TopicMetadata) -> dict[str, Any]:
        partitions = []
        try:
            states = await self.node.coordinator.partition_states(meta.name)
        except ANY_ERROR as exc:
            return {**_topic_error(meta.name, error_code(exc)), "topic_id": topic_uuid(meta)}
        for state in states:
            partitions.append({"error_code": NONE if state.leader >= 0 else LEADER_NOT_AVAILABLE,
                               "partition_index": state.partition, "leader_id": state.leader,
                               "leader_epoch": state.leader_epoch, "replica_nodes": list(state.replicas),
                               "isr_nodes": list(state.isr), "offline_replicas": []})
        return {"error_code": NONE, "name": meta.name, "topic_id": topic_uuid(meta),
                "is_internal": meta.name.startswith("__"), "partitions": partitions,
                "topic_authorized_operations": NO_OPERATIONS}

    # ---- produce -----------------------------------------------------------------------------

    async def produce(self, session: Session, request: Any) -> dict[str, Any] | None:
        acks = ACKS.get(int(request.acks))
        ctx = session.context()
        budget = [self.node.config.request_body_bytes_max]
        if sum(len(topic.partition_data) for topic in request.topic_data) > PARTITIONS_PER_REQUEST_MAX:
            raise BodyError(f"a Produce naming more than {PARTITIONS_PER_REQUEST_MAX} partitions")
        responses: dict[str, list[dict[str, Any]]] = {}
        throttle = Throttle(request.timeout.total_seconds())
        for topic in request.topic_data:
            name = str(topic.name)
            for part in topic.partition_data:
                index = int(part.index)
                if acks is None:
                    answer: dict[str, Any] = _produce_error(index, INVALID_REQUIRED_ACKS)
                else:
                    payload = _Records(index, bytes(part.records or b""), budget, self.checks)
                    answer = await self._produce_partition(ctx, name, index, payload, acks, throttle)
                responses.setdefault(name, []).append(answer)
        if acks == "0":  # no answer: a failed write closes the connection, as Kafka does, so the client sees it
            session.failed = any(p["error_code"] for parts in responses.values() for p in parts)
            return None
        return {"responses": [{"name": n, "partition_responses": parts} for n, parts in responses.items()],
                "throttle_time": throttle.ms}

    async def _produce_partition(self, ctx: CallContext, topic: str, partition: int, payload: _Records,
                                 acks: str, throttle: Throttle) -> dict[str, Any]:
        try:
            published = await throttle.call(lambda: self.api.publish(ctx, topic, payload, acks))
        except (record_batch.RecordBatchError, *ANY_ERROR) as exc:
            return _produce_error(partition, error_code(exc), str(exc)[:200])
        base = published.offsets[0]["offset"] if published.offsets else -1
        return {"index": partition, "error_code": NONE, "base_offset": base, "log_append_time": None,
                "log_start_offset": -1, "record_errors": [], "error_message": None}

    async def init_producer_id(self, session: Session, request: Any) -> dict[str, Any]:
        """A producer identity bound to the caller (``logbroker.producer_ids``), as
        ``POST /v1/producers`` gives; transactions are not served yet."""
        if request.transactional_id is not None:
            return {"throttle_time": 0, "error_code": INVALID_REQUEST, "producer_id": -1,
                    "producer_epoch": -1}
        issued = issue(session.context().principal.name, _PRODUCER_RNG, sequenced=True)
        return {"throttle_time": 0, "error_code": NONE, "producer_id": issued.producer_id,
                "producer_epoch": issued.producer_epoch}

    # ---- fetch -------------------------------------------------------------------------------

    async def fetch(self, session: Session, request: Any) -> dict[str, Any]:
        """Partitions in request order until the response's bytes reach ``max_bytes`` (the first
        batch always goes, KIP-74; later partitions get their high watermark and no records).
        With nothing to send, every partition is long-polled at once on one of the caller's
        long-polls, and the first to get records ends the wait."""
        ctx = session.context()
        if sum(len(t.partitions) for t in request.topics) > PARTITIONS_PER_REQUEST_MAX:
            raise BodyError(f"a Fetch naming more than {PARTITIONS_PER_REQUEST_MAX} partitions")
        by_id = type(request).__version__ >= FETCH_BY_ID_VERSION
        named = self._fetch_names(request.topics, by_id)
        wanted = [(name, int(p.partition), int(p.fetch_offset), max(0, int(p.partition_max_bytes)))
                  for t, name in named if name is not None for p in t.partitions]
        config = self.node.config
        rack = getattr(request, "rack_id", "") or None
        max_wait_ms = min(max(0, int(request.max_wait.total_seconds() * 1000)), config.fetch_wait_ms_max)
        budget = min(max(1, int(getattr(request, "max_bytes", config.fetch_bytes_max))), config.fetch_bytes_max)
        throttle_ms = await self._repay_fetch_debt(ctx)
        results = await self._read_in_order(ctx, wanted, budget, rack, {})
        if max_wait_ms > 0 and wanted and not any(r["records"] for r in results.values()):
            first = await self._first_data(ctx, wanted, max_wait_ms, rack)
            if first:
                results = await self._read_in_order(ctx, wanted, budget, rack, first)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        leaders: set[int] = set()
        for (topic, index), partition in results.items():
            if partition["error_code"] in NOT_LEADER_CODES:
                _hint_leader(self.node.coordinator, topic, index, partition, leaders)
            by_topic.setdefault(topic, []).append(partition)
        responses = await self._by_id_responses(ctx, named, by_topic) if by_id else \
            [{"topic": t, "partitions": parts} for t, parts in by_topic.items()]
        return {"throttle_time": throttle_ms, "error_code": NONE, "session_id": 0, "responses": responses,
                "node_endpoints": _endpoints(self.node.coordinator, leaders) if leaders else []}

    def _fetch_names(self, topics: Sequence[Any], by_id: bool) -> list[tuple[Any, str | None]]:
        """Each topic of a Fetch and its name: as it names it, or (``by_id``) the name of the live
        topic with its id (None: no such topic), one cache lookup each."""
        if not by_id:
            return [(t, str(t.topic)) for t in topics]
        coordinator = self.node.coordinator
        named: list[tuple[Any, str | None]] = []
        for t in topics:
            meta = topic_ids.resolve(coordinator, t.topic_id)
            named.append((t, None if meta is None else meta.name))
        return named

    async def _by_id_responses(self, ctx: CallContext, named: Sequence[tuple[Any, str | None]],
                               by_topic: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A by-id Fetch's topics in request order, answered with their ids: an id that named no
        topic, or no longer names the one read (deleted, or made again, meanwhile: what was read
        is dropped), is UNKNOWN_TOPIC_ID on each partition; a refusal is too unless the caller may
        describe the topic (``topic_ids.by_id_code``)."""
        coordinator = self.node.coordinator
        responses = []
        for t, name in named:
            parts = None if name is None else by_topic.pop(name, None)
            if name is not None and parts is None:
                continue  # a topic named twice: answered once
            now = None if name is None else topic_ids.resolve(coordinator, t.topic_id)
            if parts is None or now is None or now.name != name:
                parts = [_fetch_error(int(p.partition), UNKNOWN_TOPIC_ID) for p in t.partitions]
            else:
                for part in parts:
                    if part["error_code"] == TOPIC_AUTHORIZATION_FAILED:
                        code = await topic_ids.by_id_code(self.api, ctx, name, part["error_code"])
                        part.update(_fetch_error(part["partition_index"], code))
            responses.append({"topic": name or "", "topic_id": t.topic_id or ZERO_UUID, "partitions": parts})
        return responses

    async def _repay_fetch_debt(self, ctx: CallContext) -> int:
        """Wait out the caller's fetch-quota debt before reading (at most ``THROTTLE_WAIT_MAX_S``),
        as a stream does: the Fetch is slowed, not refused; the wait is its ``throttle_time_ms``."""
        pause = self.api.streams.pause_s(ctx)
        if pause <= 0:
            return 0
        pause = min(math.ceil(pause * 1000) / 1000 + TIMER_SLACK_S, THROTTLE_WAIT_MAX_S)
        await asyncio.sleep(pause)
        return round(pause * 1000)

    async def _read_in_order(self, ctx: CallContext, wanted: Sequence[tuple[str, int, int, int]], budget: int,
                             rack: str | None, got: dict[tuple[str, int], dict[str, Any]]
                             ) -> dict[tuple[str, int], dict[str, Any]]:
        """Each partition read without waiting (or taken from ``got``), within ``budget`` bytes."""
        results: dict[tuple[str, int], dict[str, Any]] = {}
        sent = 0
        for topic, partition, offset, partition_bytes in wanted:
            result = got.get((topic, partition))
            if result is None:
                room = min(partition_bytes, budget - sent)
                result = await self._fetch_partition(ctx, topic, partition, offset, max(1, room), wait_ms=0,
                                                     rack=rack)
                if room <= 0 or (sent and sent + len(result["records"] or b"") > budget):
                    result["records"] = b""  # its watermark only
            sent += len(result["records"] or b"")
            results[(topic, partition)] = result
        return results

    async def _first_data(self, ctx: CallContext, wanted: Sequence[tuple[str, int, int, int]], wait_ms: int,
                          rack: str | None) -> dict[tuple[str, int], dict[str, Any]]:
        """Long-poll every partition at once (one of the caller's long-polls for them all): the
        partitions that got records by the time the first did."""
        try:
            with self.api.long_polls_hold(ctx):
                return await self._wait_first(ctx, wanted, wait_ms, rack)
        except TooManyRequestsError:  # past long_polls_max: no wait (the answer has no records)
            return {}

    async def _wait_first(self, ctx: CallContext, wanted: Sequence[tuple[str, int, int, int]], wait_ms: int,
                          rack: str | None) -> dict[tuple[str, int], dict[str, Any]]:
        tasks = {asyncio.create_task(self._fetch_partition(ctx, *item, wait_ms=wait_ms, rack=rack,
                                                           long_poll_held=True)): item[:2] for item in wanted}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return {tasks[t]: t.result() for t in done
                if not t.cancelled() and t.exception() is None and t.result()["records"]}

    async def _fetch_partition(self, ctx: CallContext, topic: str, partition: int, offset: int, max_bytes: int, *,
                               wait_ms: int, rack: str | None, long_poll_held: bool = False) -> dict[str, Any]:
        """One partition's answer: its records, or its error code. A read the caller's quota refuses
        (an earlier partition of the request put the caller in debt) is answered with no records
        and no error, as Kafka answers a fetch over its quota: the client fetches again, and that
        Fetch first waits the debt out (``_repay_fetch_debt``)."""
        async def render(got: tuple[LogRead, int]) -> Answered[dict[str, Any]]:
            read, high_watermark = got
            data, records = kafka_batches(read.data, offset)
            return Answered({"partition_index": partition, "error_code": NONE, "high_watermark": high_watermark,
                             "last_stable_offset": high_watermark, "log_start_offset": -1,
                             "aborted_transactions": None, "preferred_read_replica": -1, "records": data},
                            len(data), records)
        try:
            if rack:  # KIP-392: a reader in another rack than this node's is sent to a replica in its own
                await self.api.authorize(ctx, topic, "read")
                replica = self.node.reads.preferred_read_replica(topic, partition, rack)
                if replica is not None:
                    high_watermark = self.node.reads.local_high_watermark(topic, partition)
                    hw = -1 if high_watermark is None else high_watermark
                    return {"partition_index": partition, "error_code": NONE, "high_watermark": hw,
                            "last_stable_offset": hw, "log_start_offset": -1, "aborted_transactions": None,
                            "preferred_read_replica": replica, "records": b""}
            return await self.api.fetch(ctx, topic, partition, offset, max_bytes=max(1, max_bytes),
                                        wait_ms=wait_ms, rack=rack, answer=render, long_poll_held=long_poll_held)
        except TooManyRequestsError:
            high_watermark = self.node.reads.local_high_watermark(topic, partition)
            hw = -1 if high_watermark is None else high_watermark
            return {**_fetch_error(partition, NONE), "high_watermark": hw, "last_stable_offset": hw}
        except ANY_ERROR as exc:
            return _fetch_error(partition, error_code(exc))

    # ---- offsets -----------------------------------------------------------------------------

    async def list_offsets(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()
        if sum(len(topic.partitions) for topic in request.topics) > PARTITIONS_PER_REQUEST_MAX:
            raise BodyError(f"a ListOffsets naming more than {PARTITIONS_PER_REQUEST_MAX} partitions")
        topics = []
        for topic in request.topics:
            name = str(topic.name)
            partitions = []
            for part in topic.partitions:
                partitions.append(await self._offset(ctx, name, int(part.partition_index), int(part.timestamp)))
            topics.append({"name": name, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    async def _offset(self, ctx: CallContext, topic: str, partition: int, timestamp: int) -> dict[str, Any]:
        at = "latest" if timestamp == LATEST else "earliest" if timestamp == EARLIEST else str(timestamp)
        try:
            if timestamp < 0 and timestamp not in (LATEST, EARLIEST):
                raise InvalidRequestError(f"timestamp {timestamp}: only -1 (latest) and -2 (earliest) are served")
            found = await self.api.list_offsets(ctx, topic, partition, at)
        except ANY_ERROR as exc:
            return {"partition_index": partition, "error_code": error_code(exc), "timestamp": -1, "offset": -1}
        offset = found.get("offset")
        return {"partition_index": partition, "error_code": NONE, "timestamp": -1,
                "offset": -1 if offset is None else offset, "leader_epoch": -1}


def _topic_error(name: str | None, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": [],
            "topic_authorized_operations": NO_OPERATIONS}


def _hint_leader(coordinator: Coordinator, topic: str, index: int, partition: dict[str, Any],
                 leaders: set[int]) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its
    leader and epoch as the cache knows them (``current_leader``; when it knows one), and the
    leader joins ``leaders``, whose addresses the answer gives (``node_endpoints``, v16)."""
    state = coordinator.cached_partition(topic, index)
    if state is not None and state.leader >= 0:
        partition["current_leader"] = {"leader_id": state.leader, "leader_epoch": state.leader_epoch}
        leaders.add(state.leader)


def _endpoints(coordinator: Coordinator, leaders: set[int]) -> list[dict[str, Any]]:
    """Fetch's ``node_endpoints``: the Kafka address of each live node of ``leaders`` that has one."""
    endpoints = []
    for node_id in sorted(leaders):
        info = coordinator.cached_node(node_id)
        where = None if info is None else wire.host_port(info.kafka_address)
        if info is not None and where is not None:
            endpoints.append({"node_id": node_id, "host": where[0], "port": where[1], "rack": info.rack})
    return endpoints


def _fetch_error(partition: int, code: int) -> dict[str, Any]:
    """A Fetch partition answered ``code``: with empty records, as Kafka's brokers answer it, never
    null ones (librdkafka cannot parse a null record set: it drops the whole answer, error and all,
    and fetches again at once, for ever)."""
    return {"partition_index": partition, "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


def _produce_error(partition: int, code: int, message: str | None = None) -> dict[str, Any]:
    return {"index": partition, "error_code": code, "base_offset": -1, "log_append_time": None,
            "log_start_offset": -1, "record_errors": [], "error_message": message}

