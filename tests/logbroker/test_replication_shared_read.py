"""A leadership's shipments: followers asking for the same range of an unchanged log share one
read and get exactly what the log holds; a grown log, another range or a large read is read
afresh, and the shared copy is let go once every follower took it."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from coordinator.models import PartitionState
from logbroker.replica_manager import Replica, WaiterBudget
from logbroker.replication.leader import SHARED_READ_BYTES_MAX, Leadership
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of


class CountingLog:
    """A partition log whose reads are counted (everything else passes through)."""

    def __init__(self, log: PartitionLog) -> None:
        self.inner = log
        self.reads = 0

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return self.inner.read(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def leadership(tmp_path) -> Iterator[tuple[Leadership, CountingLog]]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="interval"))
        replica = Replica("t", 0, log, GroupCommit(log, pool), WaiterBudget(10), high_watermark=0)
        replica.epoch = 1
        replica.leader_hook = lambda _r: None
        counting = CountingLog(log)
        replica.log = counting  # type: ignore[assignment]
        lead = Leadership(replica, PartitionState("t", 0, (1, 2, 3), (1, 2, 3), 1, 1), 1, min_insync=1,
                          fenced=lambda: False)
        yield lead, counting
        log.close()


def test_followers_of_one_range_share_one_read_of_what_the_log_holds(leadership):
    lead, log = leadership
    lead.replica.append(batch_of([b"a", b"b"]))
    first = lead.shipment(0, 1 << 20)
    second = lead.shipment(0, 1 << 20)
    read = log.inner.read(0, 1 << 20)
    assert first == second == (0, bytes(read.data)) and log.reads == 1
    # Both followers took it: a third call reads again.
    assert lead.shipment(0, 1 << 20) == first and log.reads == 2


def test_a_grown_log_or_another_range_is_read_afresh(leadership):
    lead, log = leadership
    lead.replica.append(batch_of([b"a"]))
    assert lead.shipment(0, 1 << 20)[0] == 0
    lead.replica.append(batch_of([b"b"]))
    grown = lead.shipment(0, 1 << 20)
    assert grown == (0, bytes(log.inner.read(0, 1 << 20).data)) and log.reads == 2
    assert lead.shipment(1, 1 << 20) == (1, bytes(log.inner.read(1, 1 << 20).data)) and log.reads == 3
    assert lead.shipment(0, 10)[1] == bytes(log.inner.read(0, 10).data) and log.reads == 4


def test_a_large_read_is_not_kept(leadership):
    lead, log = leadership
    while lead.replica.log.size_bytes <= SHARED_READ_BYTES_MAX:
        lead.replica.append(batch_of([b"x" * 4000] * 16))
    big = lead.shipment(0, 1 << 30)
    assert len(big[1]) > SHARED_READ_BYTES_MAX
    assert lead.shipment(0, 1 << 30) == big and log.reads == 2
