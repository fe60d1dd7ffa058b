"""The node's one write gate (``Node._check_append``, decision 0340) refuses exactly what the
checks it replaced refused, with the same codes: the lease fence (``Node._check_fence``), a move's
freeze (``PartitionMover.check_writable``), a leadership not taken up (``Node._check_leadership``),
a closed or handing-over leadership, ``min_insync_replicas`` and the waiter bound
(``Leadership.check_writable``). The former checks are written out below as the oracle, in their
order; the gate runs over a real ``Leadership`` and ``PartitionMover``, and a node object that
holds only what the gate reads."""

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
from logbroker.errors import BrokerError
from logbroker.node import Node
from logbroker.partition_moves import PartitionMover
from logbroker.replica_manager import Replica, WaiterBudget
from logbroker.replication.leader import Leadership
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
        node = types.SimpleNamespace(
            clustered=clustered, config=types.SimpleNamespace(node_id=1),
            coordinator=types.SimpleNamespace(lease_valid_until=lambda: lease_s),
            replication=types.SimpleNamespace(leadership=lambda topic, partition: lead if leads else None))
        node.moves = PartitionMover(node)  # type: ignore[arg-type]
        if frozen_s is not None:
            node.moves._frozen[("t", 0)] = frozen_s
        expected = former_checks(clustered=clustered, lease_s=lease_s, frozen_s=frozen_s, leads=leads,
                                 closed=closed, handing_over=handing_over, isr=isr, min_insync=min_insync,
                                 waiting=waiting, acks=acks)
        try:
            Node._check_append(node, "t", 0, acks)  # type: ignore[arg-type]
            got = None
        except BrokerError as exc:
            got = exc.code
        assert got == expected
        if frozen_s is not None and frozen_s <= now:
            assert ("t", 0) not in node.moves._frozen, "a lapsed freeze is forgotten"
    finally:
        loop.close()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition_machine, "ACK_WAITERS_MAX", WAITERS_MAX)
        yield patch

