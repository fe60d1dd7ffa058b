"""A follower's trouble does not hold ``acks=all`` writes for its lease (DESIGN §6, decision 0265):
on a real cluster whose leases last ``LEASE_TTL_MS``, a follower that is paused (SIGSTOP) or
killed leaves the ISR while etcd still lists it alive, and a write is acknowledged by the leader
and the other follower meanwhile; the follower rejoins once it has caught up, and every replica
then holds the same records. With ``min_insync_replicas`` equal to the replication factor the
stalled follower stays in the ISR (a shrink would leave too few): the write is not acknowledged,
and once the lease takes the follower out it is refused, as is the next one, with nothing stored."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from logbroker.client import Client
from logbroker.read_path import FIGURES_DEADLINE_S
from logbroker.replication.manager import FAILBACK_DELAY_MS
from segments.batch import encode_values
from tests.cluster.test_replication import (
    HEAL_S,
    alive_nodes,
    all_in_sync,
    create,
    heal,
    identical_replicas,
    kill,
    led_elsewhere,
    partition,
    produce,
    settled,
)
from tests.support.auth import ADMIN, ADMIN_PASSWORD
from tests.support.cluster import Cluster, running_cluster, wait_until

# Long enough that a follower's lease cannot lapse while the tests look: anything the ISR does
# before it is the stall rule's doing, not the lease's.
LEASE_TTL_MS: Final = 8_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("isr-stall")),
                         extra=("--lease-ttl-ms", str(LEASE_TTL_MS))) as running:
        yield running


def _leader_and_follower(placed: dict[str, Any]) -> tuple[int, int]:
    leader = int(placed["leader"])
    return leader, next(n for n in placed["replicas"] if n != leader)


def _left_while_alive(cluster: Cluster, token: dict[str, str], topic: str, leader: int, follower: int) -> None:
    """The leader's ISR no longer has ``follower``, while etcd still holds its lease."""
    state = wait_until(lambda: (s := partition(cluster, leader, topic, 0, token))
                       and follower not in s["in_sync_replicas"] and s, timeout_s=LEASE_TTL_MS / 1000)
    assert state["leader"] == leader and len(state["in_sync_replicas"]) == 2, state
    assert alive_nodes(cluster, leader, token)[follower], "the follower's lease had lapsed: no stall rule shown"


def test_a_paused_follower_leaves_the_isr_within_its_lease_and_acks_all_goes_on(cluster: Cluster,
                                                                                 token: dict[str, str]):
    heal(cluster, token)
    leader, follower = _leader_and_follower(create(cluster, token, "stall-paused", 1, 3)[0])
    assert produce(cluster, leader, token, "stall-paused", 0, "before", "all").status == 200
    os.kill(cluster.nodes[follower].pid, signal.SIGSTOP)
    try:
        reply = produce(cluster, leader, token, "stall-paused", 0, "during", "all")
        assert reply.status == 200, (reply.status, reply.data[:300])
        _left_while_alive(cluster, token, "stall-paused", leader, follower)
    finally:
        os.kill(cluster.nodes[follower].pid, signal.SIGCONT)
    wait_until(lambda: all_in_sync(cluster, leader, "stall-paused", token), timeout_s=HEAL_S)
    assert produce(cluster, leader, token, "stall-paused", 0, "after", "all").status == 200
    records = identical_replicas(cluster, token, "stall-paused", 0)
    assert [v for _, v in records] == ["before", "during", "after"]


def test_a_killed_follower_leaves_the_isr_within_its_lease_and_rejoins_once_restarted(cluster: Cluster,
                                                                                      token: dict[str, str]):
    """A killed follower may also have its session ended by its peers' crash evidence (decision
    0260) before the stall rule acts: either way it is out before its lease could have lapsed."""
    heal(cluster, token)
    leader, follower = _leader_and_follower(create(cluster, token, "stall-killed", 1, 3)[0])
    assert produce(cluster, leader, token, "stall-killed", 0, "before", "all").status == 200
    killed_at = time.monotonic()
    kill(cluster, follower)
    reply = produce(cluster, leader, token, "stall-killed", 0, "during", "all")
    assert reply.status == 200, (reply.status, reply.data[:300])
    state = wait_until(lambda: (s := partition(cluster, leader, "stall-killed", 0, token))
                       and follower not in s["in_sync_replicas"] and s, timeout_s=LEASE_TTL_MS / 1000)
    assert time.monotonic() - killed_at < LEASE_TTL_MS / 1000, "only the lapsed lease took the follower out"
    assert state["leader"] == leader and len(state["in_sync_replicas"]) == 2, state
    cluster.start(follower)
    wait_until(lambda: all_in_sync(cluster, leader, "stall-killed", token), timeout_s=HEAL_S)
    assert produce(cluster, leader, token, "stall-killed", 0, "after", "all").status == 200
    records = identical_replicas(cluster, token, "stall-killed", 0)
    assert [v for _, v in records] == ["before", "during", "after"]


def test_a_stall_never_takes_the_isr_below_min_insync_and_such_writes_are_refused(cluster: Cluster,
                                                                                  token: dict[str, str]):
    heal(cluster, token)
    placed = create(cluster, token, "stall-strict", 1, 3, {"min_insync_replicas": 3})[0]
    leader, follower = _leader_and_follower(placed)
    assert produce(cluster, leader, token, "stall-strict", 0, "before", "all").status == 200
    replies: list[Any] = []
    os.kill(cluster.nodes[follower].pid, signal.SIGSTOP)
    try:
        writer = threading.Thread(target=lambda: replies.append(
            produce(cluster, leader, token, "stall-strict", 0, "waits", "all")))
        writer.start()
        wait_until(lambda: not alive_nodes(cluster, leader, token)[follower], timeout_s=LEASE_TTL_MS / 1000 + 15)
        writer.join(timeout=60)
        assert replies, "the waiting write got no answer"
        state = partition(cluster, leader, "stall-strict", 0, token)
        assert follower not in state["in_sync_replicas"], "only the lapsed lease takes the follower out"
        refused = replies[0]
        assert refused.status == 503 and refused.json()["code"] == "not_enough_replicas", (refused.status,
                                                                                            refused.data[:300])
        reply = produce(cluster, leader, token, "stall-strict", 0, "refused", "all")
        assert reply.status == 503 and reply.json()["code"] == "not_enough_replicas", (reply.status, reply.data)
        after = partition(cluster, leader, "stall-strict", 0, token)
        assert after["log_end_offset"] == state["log_end_offset"], "a refused write was stored"
    finally:
        os.kill(cluster.nodes[follower].pid, signal.SIGCONT)
    wait_until(lambda: all_in_sync(cluster, leader, "stall-strict", token), timeout_s=HEAL_S)
    assert produce(cluster, leader, token, "stall-strict", 0, "again", "all").status == 200


def test_a_paused_leader_of_one_partition_holds_up_no_client_call_to_the_others(cluster: Cluster,
                                                                                 token: dict[str, str]) -> None:
    """A client reads the placement (``GET /v1/topics/{name}?offsets=false``) whenever its
    metadata is stale, and that read asks no other node: a paused node that leads one partition
    (its lease still held) does not hold up calls to the others. The full describe asks each
    leader for its offsets and waits up to ``FIGURES_DEADLINE_S`` on a silent one; every call of
    a client then waited that long on each metadata read."""
    heal(cluster, token)
    placed = create(cluster, token, "stall-placement", 3, 1)
    paused = int(placed[0]["leader"])
    target = next(p for p in placed if int(p["leader"]) != paused)
    via = int(target["leader"])
    urls = [cluster.nodes[n].url for n in sorted(cluster.nodes) if n != paused]
    took: list[float] = []

    async def write() -> None:
        async with Client(urls, username=ADMIN, password=ADMIN_PASSWORD, metadata_max_age_s=0.0) as client:
            for i in range(5):
                started = time.monotonic()
                await client.produce_batch("stall-placement", target["partition"], encode_values([f"v{i}".encode()]))
                took.append(time.monotonic() - started)

    os.kill(cluster.nodes[paused].pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        described = cluster.http(via).json("GET", "/v1/topics/stall-placement?offsets=false", headers=token)
        assert time.monotonic() - started < FIGURES_DEADLINE_S / 2, "the placement read waited on the paused node"
        assert [(p["partition"], p["leader"]) for p in described["partitions"]] == \
            [(p["partition"], p["leader"]) for p in placed]
        assert not any("latest_offset" in p for p in described["partitions"])
        asyncio.run(write())
        assert max(took) < FIGURES_DEADLINE_S / 2, took
        full = cluster.http(via).json("GET", "/v1/topics/stall-placement", headers=token)
        figures = {p["partition"]: p["latest_offset"] for p in full["partitions"]}
        assert figures[0] is None, "the paused leader answered for its partition"
        assert figures[target["partition"]] == 5
    finally:
        os.kill(cluster.nodes[paused].pid, signal.SIGCONT)


def test_leadership_is_not_handed_back_to_a_preferred_replica_that_is_paused(cluster: Cluster,
                                                                             token: dict[str, str]) -> None:
    """Failback hands leadership to the preferred replica once it is back in the ISR. One paused
    by then (its lease still held) must not get it: it could not take it up, and the partition
    would have no leader until its lease lapsed. The leader keeps it, acks=all writes go on, and
    the preferred replica gets it once it answers again (decision 0381)."""
    heal(cluster, token)
    preferred = int(create(cluster, token, "stall-failback", 1, 3)[0]["leader"])
    via = next(n for n in sorted(cluster.nodes) if n != preferred)
    kill(cluster, preferred)
    interim = int(wait_until(lambda: led_elsewhere(cluster, via, "stall-failback", preferred, token),
                             timeout_s=HEAL_S)["leader"])
    cluster.start(preferred)
    wait_until(lambda: preferred in partition(cluster, via, "stall-failback", 0, token)["in_sync_replicas"],
               timeout_s=HEAL_S, interval_s=0.02)
    os.kill(cluster.nodes[preferred].pid, signal.SIGSTOP)
    try:
        assert partition(cluster, via, "stall-failback", 0, token)["leader"] == interim, \
            "handed back before the replica could be paused: nothing shown"
        time.sleep(FAILBACK_DELAY_MS / 1000 * 3)  # several failback rounds
        state = partition(cluster, via, "stall-failback", 0, token)
        assert state["leader"] == interim, state
        assert alive_nodes(cluster, via, token)[preferred], "its lease lapsed: the lease rule, not this one, acted"
        reply = produce(cluster, interim, token, "stall-failback", 0, "during", "all")
        assert reply.status == 200, (reply.status, reply.data[:300])
    finally:
        os.kill(cluster.nodes[preferred].pid, signal.SIGCONT)
    wait_until(lambda: settled(cluster, via, "stall-failback", 0, token), timeout_s=HEAL_S)
    assert [v for _, v in identical_replicas(cluster, token, "stall-failback", 0)] == ["during"]
