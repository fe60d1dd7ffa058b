"""The node's one write gate (``WritePath._check_append``, decision 0340) refuses exactly what the
checks it replaced refused, with the same codes: the lease fence (``Node._check_fence``), a move's
freeze (``PartitionMover.check_writable``), a leadership not taken up (``Node._check_leadership``),
a closed or handing-over leadership, ``min_insync_replicas`` and the waiter bound
(``Leadership.check_writable``). The former checks are written out below as the oracle, in their
order; the gate runs over a real ``Leadership`` and ``PartitionMover`` in a real ``WritePath``
whose other collaborators hold only what the write path reads."""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from coordinator.models import PartitionState
from logbroker import partition_machine
from logbroker.errors import BrokerError, NotLeaderError
from logbroker.partition_moves import PartitionMover
from logbroker.records import IncomingRecord
from logbroker.replica_manager import Replica, WaiterBudget
from logbroker.replication.leader import Leadership
from logbroker.write_path import WritePath
from segments.batch import ProducerRecord
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog

WAITERS_MAX = 3  # the bound, made small enough to reach


def former_checks(*, clustered: bool, lease_s: float, frozen_s: float | None, leads: bool, closed: bool,
                  handing_over: bool, isr: int, min_insync: int, waiting: int, acks: str) -> str | None:
    """The code the six-check write path refused with, or None (main before decision 0340)."""
    now = time.monotonic()
    if clustered and now >= lease_s:
        return "not_leader"  # Node._check_fence
    if frozen_s is not None and now < frozen_s:
        return "not_leader"  # PartitionMover.check_writable
    if not clustered:
        return None
    if not leads:
        return "not_leader"  # Node._check_leadership
    if closed or handing_over:
        return "not_leader"  # Leadership.check_writable
    if acks == "all":
        if isr < min_insync:
            return "not_enough_replicas"
        if waiting >= WAITERS_MAX:
            return "not_available"
    return None


def _no_freeze(topic: str, partition: int) -> None:
    """The mover's ``check_leads``: only its ``freeze`` calls it, and these tests set a freeze by hand."""
    raise AssertionError("check_leads is called only by a freeze")


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    with tempfile.TemporaryDirectory() as root, ThreadPoolExecutor(max_workers=1) as pool:
        log = PartitionLog.open(f"{root}/t-0", LogConfig(flush="interval"))
        yield Replica("t", 0, log, GroupCommit(log, pool), WaiterBudget(10), high_watermark=0)
        log.close()


SECONDS = st.sampled_from([-math.inf, -10.0, 10.0, math.inf])


@settings(max_examples=400, deadline=None)
@given(clustered=st.booleans(), lease=SECONDS, frozen=st.none() | st.sampled_from([-10.0, 10.0]),
       leads=st.booleans(), closed=st.booleans(), handing_over=st.booleans(), isr=st.integers(1, 3),
       min_insync=st.integers(1, 3), waiting=st.integers(0, WAITERS_MAX), acks=st.sampled_from(["0", "1", "all"]))
def test_the_gate_refuses_what_the_former_checks_refused(
        replica: Replica, monkeypatch_module: pytest.MonkeyPatch, clustered: bool, lease: float,
        frozen: float | None, leads: bool, closed: bool, handing_over: bool, isr: int, min_insync: int,
        waiting: int, acks: str) -> None:
    now = time.monotonic()
    lease_s = now + lease
    frozen_s = None if frozen is None else now + frozen
    state = PartitionState("t", 0, (1, 2, 3), (1, 2, 3)[:isr], 1, 4)
    lead = Leadership(replica, state, 1, min_insync, fenced=lambda: False)
    lead.closed, lead.handing_over = closed, handing_over
    loop = asyncio.new_event_loop()
    try:
        lead._acks = [(1, loop.create_future(), 0) for _ in range(waiting)]
        coordinator = types.SimpleNamespace(is_cluster=clustered, lease_valid_until=lambda: lease_s)
        replicas = types.SimpleNamespace(get=lambda topic, partition: replica)
        moves = PartitionMover(coordinator, replicas, types.SimpleNamespace(), _no_freeze)  # type: ignore[arg-type]
        if frozen_s is not None:
            moves._frozen[("t", 0)] = frozen_s
        writes = _write_path(coordinator, replicas, moves, leadership=lambda topic, partition: lead if leads else None)
        expected = former_checks(clustered=clustered, lease_s=lease_s, frozen_s=frozen_s, leads=leads,
                                 closed=closed, handing_over=handing_over, isr=isr, min_insync=min_insync,
                                 waiting=waiting, acks=acks)
        try:
            writes._check_append("t", 0, acks)
            got = None
        except BrokerError as exc:
            got = exc.code
        assert got == expected
        if frozen_s is not None and frozen_s <= now:
            assert ("t", 0) not in moves._frozen, "a lapsed freeze is forgotten"
    finally:
        loop.close()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition_machine, "ACK_WAITERS_MAX", WAITERS_MAX)
        yield patch


def _write_path(coordinator: object, replicas: object, moves: PartitionMover, *,
                leadership: object) -> WritePath:
    """A ``WritePath`` of node 1 over these stand-ins (what the write gate reads: the coordinator's
    lease, the replicas, the leaderships and the mover's freezes)."""
    return WritePath(types.SimpleNamespace(node_id=1), coordinator,  # type: ignore[arg-type]
                     replicas, types.SimpleNamespace(),  # type: ignore[arg-type]
                     types.SimpleNamespace(leadership=leadership), moves,  # type: ignore[arg-type]
                     types.SimpleNamespace(), types.SimpleNamespace(), types.SimpleNamespace(),  # type: ignore[arg-type]
                     log_config=lambda meta: LogConfig(), check_serving=lambda: None)


@pytest.mark.asyncio
@pytest.mark.parametrize("change", ["hand-over", "freeze"])
async def test_a_hand_over_or_freeze_that_begins_during_the_quota_check_refuses_the_write(replica: Replica,
                                                                                        change: str) -> None:
    """``produce_records`` awaits the storage quota check between building the batches and
    appending them: the gate runs after that await, so a hand-over or a move's freeze that began
    meanwhile refuses the write and nothing is appended."""
    lead = Leadership(replica, PartitionState("t", 0, (1, 2), (1, 2), 1, 4), 1, 1, fenced=lambda: False)

    def append_once(topic: str, r: Replica, batch: bytes, records: int) -> None:
        raise AssertionError(f"a write was appended while its partition changes hands ({change})")

    async def check_storage(topic: str, batches: object) -> None:
        await asyncio.sleep(0)
        if change == "hand-over":
            lead.handing_over = True
        else:
            moves._frozen[("t", 0)] = time.monotonic() + 30

    coordinator = types.SimpleNamespace(is_cluster=True, lease_valid_until=lambda: math.inf)
    replicas = types.SimpleNamespace(get=lambda topic, partition: replica)
    moves = PartitionMover(coordinator, replicas, types.SimpleNamespace(), _no_freeze)  # type: ignore[arg-type]
    writes = _write_path(coordinator, replicas, moves, leadership=lambda topic, partition: lead)
    writes._router = types.SimpleNamespace(  # type: ignore[assignment]
        partition_count=lambda topic: 1, leader=lambda topic, partition: None)
    writes._key_hash = lambda topic: "xxh3"  # type: ignore[method-assign]
    writes._max_batch_bytes = lambda topic, p: 1 << 20  # type: ignore[method-assign]
    writes._earlier_write = lambda topic, r, batch: None  # type: ignore[method-assign]
    writes._check_storage = check_storage  # type: ignore[method-assign]
    writes._append_once = append_once  # type: ignore[method-assign]
    records = [IncomingRecord(ProducerRecord(b"v"), None)]
    with pytest.raises(NotLeaderError):
        await writes.produce_records("t", records, "1", timestamp_window=False)
