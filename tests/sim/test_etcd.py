"""The in-memory etcd: etcd's transaction, lease and watch semantics on the loop's time, the
faults a client sees (etcd down, a node cut from it, an answer lost after the write), and the
real ``EtcdCoordinator`` on it: a session lost when keepalives stop, its lease expired by etcd,
then regained."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from aetcd import rpc

from coordinator.errors import CoordinatorUnavailableError
from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import (
    cmp_create,
    cmp_exists,
    cmp_mod,
    cmp_value,
    op_delete,
    op_delete_prefix,
    op_get,
    op_put,
)
from coordinator.models import MetadataChange, NodeInfo, TopicSpec
from segments.config import LogConfig
from sim.etcd import DELETE, PUT, SimEtcd, SimEtcdClient
from sim.loop import SimLoop, run

GREATER, LESS, NOT_EQUAL = 1, 2, 3


def simulate(main: Callable[[SimEtcd], Awaitable[Any]], **kwargs: Any) -> Any:
    etcd = SimEtcd(random.Random(3), **kwargs)

    async def go() -> Any:
        return await main(etcd)

    return run(go(), loop=SimLoop())


def test_guarded_transactions():
    async def main(etcd: SimEtcd) -> None:
        c = etcd.client("n1")
        first = await c.txn([cmp_create(b"k", 0)], [op_put(b"k", b"v1")], [op_get(b"k")])
        again = await c.txn([cmp_create(b"k", 0)], [op_put(b"k", b"v2")], [op_get(b"k")])
        assert first.succeeded and not again.succeeded
        kv = again.responses[0].response_range.kvs[0]
        assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"v1", 2, 2, 1)
        assert again.header.revision == 2  # a transaction that writes nothing makes no revision
        assert not (await c.txn([cmp_mod(b"k", 1)], [op_put(b"k", b"x")])).succeeded
        updated = await c.txn([cmp_mod(b"k", 2), cmp_exists(b"k"), cmp_value(b"k", b"v1")], [op_put(b"k", b"v3")])
        assert updated.succeeded and updated.header.revision == 3
        assert not (await c.txn([cmp_value(b"absent", b"")], [op_put(b"absent", b"")])).succeeded
        for result, expected in ((GREATER, True), (LESS, False), (NOT_EQUAL, True)):
            compare = rpc.Compare(result=result, target=2, key=b"k", mod_revision=2)
            assert (await c.txn([compare], [])).succeeded is expected
        _, kvs = await c.range_prefix(b"k")
        assert [(kv.value, kv.create_revision, kv.mod_revision, kv.version) for kv in kvs] == [(b"v3", 2, 3, 2)]

    simulate(main)


def test_one_revision_per_transaction_and_reads_see_earlier_writes():
    async def main(etcd: SimEtcd) -> None:
        c = etcd.client("n1")
        resp = await c.txn([], [op_put(b"p/a", b"1"), op_put(b"p/b", b"2"),
                                rpc.RequestOp(request_range=rpc.RangeRequest(key=b"p/", range_end=b"p0"))])
        assert resp.header.revision == 2
        assert [kv.key for kv in resp.responses[2].response_range.kvs] == [b"p/a", b"p/b"]
        assert {kv.mod_revision for kv in resp.responses[2].response_range.kvs} == {2}
        deleted = await c.txn([], [op_delete_prefix(b"p/"), op_delete(b"nothing")])
        assert deleted.responses[0].response_delete_range.deleted == 2 and deleted.header.revision == 3
        with pytest.raises(CoordinatorUnavailableError, match="duplicate key"):
            await c.txn([], [op_put(b"x", b"1"), op_put(b"x", b"2")])
        with pytest.raises(CoordinatorUnavailableError, match="lease not found"):
            await c.txn([], [op_put(b"x", b"1", 12345)])
        assert await c.status() == 3

    simulate(main)


def test_a_lease_expires_on_virtual_time_unless_kept_alive():
    async def main(etcd: SimEtcd) -> None:
        loop = asyncio.get_running_loop()
        c = etcd.client("n1")
        lease, ttl = await c.grant(2)
        assert ttl == 2
        await c.txn([], [op_put(b"n/1", b"up", lease), op_put(b"n/2", b"up", lease), op_put(b"other", b"")])
        await asyncio.sleep(1.5)
        assert await c.keepalive(lease, timeout_s=1) == 2
        kept = loop.time()
        await asyncio.sleep(1.9)
        assert etcd.holds_lease(lease) and (await c.range_prefix(b"n/"))[1]
        await asyncio.sleep(kept + 2.1 - loop.time())
        revision, kvs = await c.range_prefix(b"n/")
        assert not etcd.holds_lease(lease) and kvs == [] and revision == 3  # both keys gone at one revision
        assert await c.keepalive(lease, timeout_s=1) == 0
        assert (await c.range_prefix(b"other"))[1]

        second, _ = await c.grant(2)
        await c.txn([], [op_put(b"n/3", b"", second)])
        etcd.stop()  # a stopped etcd expires nothing ...
        await asyncio.sleep(10)
        assert etcd.holds_lease(second)
        etcd.start()  # ... and gives every lease a fresh TTL when it starts
        await asyncio.sleep(1.9)
        assert etcd.holds_lease(second)
        await c.revoke(second)
        assert not etcd.holds_lease(second) and (await c.range_prefix(b"n/"))[1] == []
        await c.revoke(second)  # an unknown lease is already gone

    simulate(main)


def test_a_watch_replays_from_its_revision_then_follows_with_progress_behind_the_events():
    async def main(etcd: SimEtcd) -> None:
        c = etcd.client("n1")
        await c.txn([], [op_put(b"w/a", b"1")])  # revision 2
        await c.txn([], [op_put(b"elsewhere", b"")])  # 3
        await c.txn([], [op_put(b"w/b", b"2"), op_delete(b"w/a")])  # 4
        watch = c.watch_stream()
        await watch.write(c.watch_create(b"w/", 3))
        assert (await watch.read()).created
        replay = await watch.read()
        assert [(e.type, e.kv.key, e.kv.mod_revision) for e in replay.events] == [(PUT, b"w/b", 4),
                                                                                   (DELETE, b"w/a", 4)]
        await c.txn([], [op_put(b"w/c", b"3")])  # 5
        await c.txn([], [op_put(b"elsewhere", b"again")])  # 6: not under the prefix
        await watch.write(c.watch_progress())
        live = await watch.read()
        assert [(e.kv.key, e.kv.value) for e in live.events] == [(b"w/c", b"3")]
        progress = await watch.read()
        assert not progress.events and not progress.created and progress.header.revision == 6
        watch.cancel()
        assert await watch.read() is grpc.aio.EOF

    simulate(main)


def test_a_watch_from_a_compacted_revision_is_cancelled_with_the_compact_revision():
    async def main(etcd: SimEtcd) -> None:
        c = etcd.client("n1")
        for n in range(10):
            await c.txn([], [op_put(b"k", str(n).encode())])  # revisions 2..11; 7..11 kept
        watch = c.watch_stream()
        await watch.write(c.watch_create(b"k", 3))
        resp = await watch.read()
        assert resp.canceled and resp.compact_revision == 7
        ok = c.watch_stream()
        await ok.write(c.watch_create(b"k", 7))
        assert (await ok.read()).created
        assert [e.kv.value for e in (await ok.read()).events] == [b"5"]

    simulate(main, history_max=5)


def test_faults_a_client_sees():
    async def main(etcd: SimEtcd) -> None:
        loop = asyncio.get_running_loop()
        c = SimEtcdClient(etcd, "n1", timeout_s=3.0)
        watch = c.watch_stream()
        await watch.write(c.watch_create(b"", 1))
        await watch.read()
        etcd.stop()
        start = loop.time()
        with pytest.raises(CoordinatorUnavailableError, match="refused"):
            await c.status()
        assert loop.time() - start < 0.1  # refused at once
        with pytest.raises(CoordinatorUnavailableError):
            await watch.read()  # the stream broke
        etcd.start()
        etcd.isolate("n1")
        start = loop.time()
        with pytest.raises(CoordinatorUnavailableError, match="deadline"):
            await c.status()
        assert loop.time() - start >= 3.0  # the call's deadline
        assert await etcd.client("n2").status() == 1  # others still reach etcd
        etcd.rejoin("n1")
        # cut after etcd applied the write: the write stands, the caller hears only a failure
        write = asyncio.ensure_future(c.txn([], [op_put(b"unknown", b"outcome")]))
        while etcd.revision == 1:
            await asyncio.sleep(0.0001)
        etcd.isolate("n1")
        with pytest.raises(CoordinatorUnavailableError):
            await write
        assert (await etcd.client("n2").range_prefix(b"unknown"))[1][0].value == b"outcome"

    simulate(main)


# ---- the real coordinator on it ---------------------------------------------------------------


def coordinator(etcd: SimEtcd, node_id: int) -> EtcdCoordinator:
    loop = asyncio.get_running_loop()
    info = NodeInfo(node_id, f"http://n{node_id}:8080", f"n{node_id}:7000")
    return EtcdCoordinator(["etcd:2379"], "sim", info, 2000, clock=loop.time,
                           client_factory=SimEtcdClient.factory(etcd, f"n{node_id}"))


def test_the_etcd_coordinator_loses_its_session_when_keepalives_stop_and_regains_it():
    async def main(etcd: SimEtcd) -> None:
        loop = asyncio.get_running_loop()
        one, two = coordinator(etcd, 1), coordinator(etcd, 2)
        lost: list[float] = []
        one.on_change(lambda change: lost.append(loop.time()) if change.session_lost else None)
        await one.start()
        await two.start()
        await two.create_topic(TopicSpec.parse({"name": "t", "partitions": 2}, base_config=LogConfig()), None)
        await asyncio.sleep(0.1)
        assert (await one.get_topic("t")).partitions == 2  # the watch carried it to node 1
        assert sorted(n.node_id for n in await one.nodes()) == [1, 2]

        await asyncio.sleep(5)  # keepalives hold the session far past its TTL
        assert one.session_alive() and not lost
        cut = loop.time()
        etcd.isolate("n1")
        lease = one._session.lease if one._session is not None else None
        assert lease is not None
        while etcd.holds_lease(lease):
            # fencing: node 1 never believes in a lease etcd has already expired
            assert one.lease_valid_until() <= loop.time() + 2.0
            await asyncio.sleep(0.01)
        expired = loop.time()
        assert not one.session_alive() and lost and lost[0] < expired
        assert cut + 1.0 <= expired <= cut + 2.0 + 0.1  # one TTL after the last keepalive etcd heard
        await asyncio.sleep(0.1)
        assert [n.node_id for n in await two.nodes()] == [2]  # the lease took nodes/1 with it

        etcd.rejoin("n1")
        for _ in range(100):
            if one.session_alive() and sorted(n.node_id for n in await two.nodes()) == [1, 2]:
                break
            await asyncio.sleep(0.1)
        assert one.session_alive() and sorted(n.node_id for n in await two.nodes()) == [1, 2]
        assert len(lost) == 1
        await one.close()
        await two.close()
        assert not etcd.holds_lease(lease)

    simulate(main)


def test_the_etcd_coordinator_rides_out_a_short_etcd_outage():
    async def main(etcd: SimEtcd) -> None:
        changes: list[MetadataChange] = []
        one = coordinator(etcd, 1)
        one.on_change(changes.append)
        await one.start()
        etcd.stop()
        await asyncio.sleep(0.3)  # shorter than TTL - margin: the session survives
        etcd.start()
        await asyncio.sleep(3)
        assert one.session_alive() and not any(c.session_lost for c in changes)
        await one.create_topic(TopicSpec.parse({"name": "after"}, base_config=LogConfig()), None)
        assert (await one.get_topic("after")).name == "after"  # the watch resumed: read-your-writes
        await one.close()

    simulate(main)
