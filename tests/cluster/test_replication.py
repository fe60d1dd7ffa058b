"""Replication on a real cluster (DESIGN §5-§6, issue 16): real ``logbroker serve`` processes on a
real etcd, faults by signal (kill -9, SIGSTOP/SIGCONT). What must hold:
- no record acknowledged with ``acks=all`` is lost or moved by leader failures, and once healed
  every replica's segment files hold the same records below the high watermark;
- a leader paused past its lease is replaced (higher epoch), acknowledges nothing its successor
  lacks after it resumes, and comes back as a follower with the same log;
- a returning node cuts the divergent ``acks=1`` tail its successor never had;
- a stopped follower leaves the ISR: ``acks=all`` goes on with ``min_insync_replicas`` 1 and is
  refused (nothing stored) with 2, and works again once the follower has rejoined;
- committed group offsets survive the failover of the offsets partition's leader.

The logs are compared on disk (``segments.reader``, read-only), not only through the API."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from segments.reader import SegmentReader, partition_directories
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until

REPLICA_LAG_MS: Final = 2_000
NODES: Final = (1, 2, 3)
FAILOVER_S: Final = LEASE_TTL_MS / 1000 + 15
HEAL_S: Final = 45.0
OFFSETS_TOPIC: Final = "__consumer_offsets"
LATE_WRITES: Final = 6  # per acks setting, sent to a paused leader


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("replication")),
                         extra=("--replica-lag-ms", str(REPLICA_LAG_MS))) as running:
        yield running



# ---- helpers ----------------------------------------------------------------------------------


def alive_nodes(cluster: Cluster, via: int, token: dict[str, str]) -> dict[int, bool]:
    answer = cluster.http(via).json("GET", "/v1/cluster", headers=token)
    return {n["node_id"]: n["alive"] for n in answer["nodes"]}


def partition(cluster: Cluster, via: int, topic: str, number: int, token: dict[str, str]) -> dict[str, Any]:
    """``number``'s entry of describe through ``via`` (leader, epoch, replicas, ISR, offsets)."""
    described: dict[str, Any] = cluster.http(via).json("GET", f"/v1/topics/{topic}", headers=token)
    return next(p for p in described["partitions"] if p["partition"] == number)


def placement(cluster: Cluster, via: int, topic: str, token: dict[str, str]) -> list[dict[str, Any]]:
    """The partitions of ``topic`` as ``GET /v1/cluster`` lists them (internal topics too)."""
    topics = cluster.http(via).json("GET", "/v1/cluster", headers=token)["topics"]
    found: list[dict[str, Any]] = next(t["partitions"] for t in topics if t["name"] == topic)
    return found


def settled(cluster: Cluster, via: int, topic: str, number: int, token: dict[str, str]) -> dict[str, Any] | None:
    """The partition once healed: led by its preferred replica, every replica in the ISR, and the
    leader's log end below its high watermark (nothing left to replicate); else None."""
    p = partition(cluster, via, topic, number, token)
    healthy = (p["leader"] == p["replicas"][0] and sorted(p["in_sync_replicas"]) == sorted(p["replicas"])
               and p["latest_offset"] is not None and p["latest_offset"] == p["log_end_offset"])
    return p if healthy else None


def led_elsewhere(cluster: Cluster, via: int, topic: str, old: int, token: dict[str, str]) -> dict[str, Any] | None:
    """Partition 0 of ``topic`` once a live node other than ``old`` leads it, else None."""
    p = partition(cluster, via, topic, 0, token)
    return p if p["leader"] not in (old, -1) else None


def all_in_sync(cluster: Cluster, via: int, topic: str, token: dict[str, str]) -> bool:
    """Every replica of partition 0 of ``topic`` is in its ISR."""
    p = partition(cluster, via, topic, 0, token)
    return sorted(p["in_sync_replicas"]) == sorted(p["replicas"])


def kill(cluster: Cluster, node: int) -> None:
    os.kill(cluster.nodes[node].pid, signal.SIGKILL)
    cluster.nodes[node].kill()


def heal(cluster: Cluster, token: dict[str, str]) -> None:
    """Undo what an earlier (perhaps failed) test left: resume paused nodes, restart dead ones."""
    for node in NODES:
        process = cluster.nodes[node]
        if process.proc is not None and process.proc.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
        else:
            cluster.start(node)
    wait_until(lambda: alive_nodes(cluster, 1, token) == dict.fromkeys(NODES, True), timeout_s=HEAL_S)


def create(cluster: Cluster, token: dict[str, str], name: str, partitions: int, replication: int,
           config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"name": name, "partitions": partitions, "replication_factor": replication}
    if config:
        body["config"] = config
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token, body=body)
    return [wait_until(lambda p=p: settled(cluster, 1, name, p, token), timeout_s=HEAL_S) for p in range(partitions)]


def produce(cluster: Cluster, via: int, token: dict[str, str], topic: str, number: int, value: str,
            acks: str) -> Any:
    """One record; the reply (status and body)."""
    return cluster.http(via).call("POST", f"/v1/topics/{topic}/records?acks={acks}", headers=token,
                                  body={"records": [{"value": value, "partition": number}]})


def produced_offset(cluster: Cluster, via: int, token: dict[str, str], topic: str, number: int, value: str,
                    acks: str) -> int:
    reply = produce(cluster, via, token, topic, number, value, acks)
    assert reply.status == 200, (reply.status, reply.data[:300])
    offset: int = reply.json()["offsets"][0]["offset"]
    return offset


def fetched(cluster: Cluster, via: int, token: dict[str, str], topic: str, number: int) -> list[tuple[int, str]]:
    """Every record a reader gets through ``via`` (up to the leader's high watermark)."""
    out: list[tuple[int, str]] = []
    offset = 0
    for _ in range(10_000):
        answer = cluster.http(via).json("GET", f"/v1/topics/{topic}/partitions/{number}/records"
                                               f"?offset={offset}&max_records=10000", headers=token)
        out += [(r["offset"], r["value"]) for r in answer["records"]]
        if answer["next_offset"] >= answer["high_watermark"]:
            return out
        offset = answer["next_offset"]
    raise AssertionError("the fetch loop did not end")


def on_disk(cluster: Cluster, node: int, topic: str, number: int, end: int | None = None) -> list[tuple[int, str]]:
    """The records in ``node``'s segment files for the partition, below ``end`` (read-only)."""
    directory = partition_directories(cluster.nodes[node].data_dir, topic)[number]
    return [(r.offset, (r.value or b"").decode()) for r in SegmentReader(directory).iter_records(0, end)]


def identical_replicas(cluster: Cluster, token: dict[str, str], topic: str, number: int) -> list[tuple[int, str]]:
    """Wait for the partition to settle, then check that every replica's files hold the same
    records up to the high watermark, nothing beyond it, and that readers get exactly those."""
    state = wait_until(lambda: settled(cluster, 1, topic, number, token), timeout_s=HEAL_S)
    hwm = state["latest_offset"]
    logs = {node: wait_until(lambda n=node: (r := on_disk(cluster, n, topic, number)) and len(r) == hwm and r,
                             timeout_s=HEAL_S) if hwm else on_disk(cluster, node, topic, number)
            for node in state["replicas"]}
    first = logs[state["replicas"][0]]
    assert [o for o, _ in first] == list(range(hwm)), "the leader's records have gaps"
    for node, records in logs.items():
        assert records == first, f"node {node}'s copy of {topic}/{number} differs from the leader's"
    assert fetched(cluster, 1, token, topic, number) == first
    return first


class Writers:
    """Threads producing unique values with ``acks=all`` to one partition through the nodes ``via``
    in turn until stopped, keeping what was acknowledged (offset, value) and how many were refused."""

    def __init__(self, cluster: Cluster, token: dict[str, str], topic: str, via: tuple[int, ...],
                 count: int = 2) -> None:
        self.acked: list[tuple[int, str]] = []
        self.refused: dict[int, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._args = (cluster, token, topic, via)
        self._threads = [threading.Thread(target=self._write, args=(w,)) for w in range(count)]

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)
        assert not any(thread.is_alive() for thread in self._threads)

    def _write(self, writer: int) -> None:
        cluster, token, topic, via = self._args
        n = 0
        while not self._stop.is_set():
            value = f"{topic}-w{writer}-{n}"
            node = via[(writer + n) % len(via)]
            n += 1
            try:
                reply = produce(cluster, node, token, topic, 0, value, "all")
            except OSError:
                time.sleep(0.05)
                continue
            with self._lock:
                if reply.status == 200:
                    self.acked.append((reply.json()["offsets"][0]["offset"], value))
                    continue
                self.refused[reply.status] = self.refused.get(reply.status, 0) + 1
                if reply.status not in (502, 503, 504):
                    self.errors.append(f"{reply.status} {reply.data[:300]!r}")
            time.sleep(0.05)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)


def assert_all_kept(acked: list[tuple[int, str]], records: list[tuple[int, str]]) -> None:
    """Each acknowledged record exactly at its offset, and no value stored twice."""
    stored = dict(records)
    for offset, value in acked:
        assert stored.get(offset) == value, f"acknowledged {value} at {offset} is lost or changed"
    values = [v for _, v in records]
    assert len(values) == len(set(values)), "a record is stored twice"


# ---- tests ------------------------------------------------------------------------------------


def test_acknowledged_writes_survive_three_kills_of_the_leader(cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    [start] = create(cluster, token, "thrice", 1, 3)
    epoch = start["leader_epoch"]
    with Writers(cluster, token, "thrice", NODES) as writers:
        for _ in range(3):
            wait_until(lambda: writers.count() > 0)
            leader = partition(cluster, 1, "thrice", 0, token)["leader"]
            via = next(n for n in NODES if n != leader)
            kill(cluster, leader)
            moved = wait_until(lambda v=via, old=leader: led_elsewhere(cluster, v, "thrice", old, token),
                               timeout_s=FAILOVER_S)
            assert moved["leader_epoch"] > epoch
            epoch = moved["leader_epoch"]
            before = writers.count()
            wait_until(lambda b=before: writers.count() > b + 5, timeout_s=FAILOVER_S)  # writes go on meanwhile
            cluster.start(leader)
            wait_until(lambda v=via: all_in_sync(cluster, v, "thrice", token), timeout_s=HEAL_S)
            before = writers.count()
            wait_until(lambda b=before: writers.count() > b + 5, timeout_s=FAILOVER_S)
    assert not writers.errors, writers.errors
    assert len(writers.acked) > 30
    records = identical_replicas(cluster, token, "thrice", 0)  # the preferred replica leads again
    assert_all_kept(writers.acked, records)
    assert partition(cluster, 1, "thrice", 0, token)["leader_epoch"] > epoch  # by failback
    print(f"acked {len(writers.acked)}, refused {writers.refused}, stored {len(records)}")


def test_a_leader_paused_past_its_lease_is_replaced_and_returns_as_a_follower(cluster: Cluster,
                                                                               token: dict[str, str]):
    heal(cluster, token)
    [start] = create(cluster, token, "paused", 1, 3)
    old = start["replicas"][0]
    via = next(n for n in NODES if n != old)
    late: list[tuple[str, Any]] = []  # (value, reply) of the writes sent to the paused leader itself

    def write_to_paused(value: str, acks: str) -> None:
        try:
            late.append((value, produce(cluster, old, token, "paused", 0, value, acks)))
        except OSError as exc:
            late.append((value, exc))

    with Writers(cluster, token, "paused", (via,)) as writers:
        wait_until(lambda: writers.count() > 5)
        os.kill(cluster.nodes[old].pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)
            direct = [threading.Thread(target=write_to_paused, args=(f"late-{acks}-{i}", acks))
                      for i in range(LATE_WRITES) for acks in ("1", "all")]
            for thread in direct:
                thread.start()
            new = wait_until(lambda: led_elsewhere(cluster, via, "paused", old, token), timeout_s=FAILOVER_S)
            assert new["leader_epoch"] > start["leader_epoch"]
            before = writers.count()
            wait_until(lambda: writers.count() > before + 5, timeout_s=FAILOVER_S)
        finally:
            os.kill(cluster.nodes[old].pid, signal.SIGCONT)
        for thread in direct:
            thread.join(timeout=90)
        # a follower now, with the new leader's log: back in the ISR
        wait_until(lambda: all_in_sync(cluster, via, "paused", token), timeout_s=HEAL_S)
        before = writers.count()
        wait_until(lambda: writers.count() > before + 5, timeout_s=FAILOVER_S)
    assert not writers.errors, writers.errors
    assert len(late) == 2 * LATE_WRITES
    records = identical_replicas(cluster, token, "paused", 0)  # the old leader leads again (failback)
    assert partition(cluster, 1, "paused", 0, token)["leader_epoch"] > new["leader_epoch"]
    assert_all_kept(writers.acked, records)
    # whatever the resumed node answered 200 for must be in every replica at that offset
    late_acked = [(reply.json()["offsets"][0]["offset"], value) for value, reply in late
                  if not isinstance(reply, Exception) and reply.status == 200]
    assert_all_kept(late_acked, records)
    for value, reply in late:
        if not isinstance(reply, Exception) and reply.status != 200:
            assert reply.status in (502, 503, 504), (value, reply.status, reply.data[:300])
    print(f"acked {len(writers.acked)}, refused {writers.refused}, late answers "
          f"{[(v, getattr(r, 'status', r)) for v, r in late]}")


def test_a_returning_leader_truncates_its_divergent_acks_1_tail(cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    [start] = create(cluster, token, "diverge", 1, 2)
    leader, follower = start["replicas"]
    committed = [(produced_offset(cluster, leader, token, "diverge", 0, f"kept-{i}", "all"), f"kept-{i}")
                 for i in range(5)]
    assert [o for o, _ in committed] == list(range(5))
    wait_until(lambda: on_disk(cluster, follower, "diverge", 0) == committed)
    time.sleep(0.6)  # an idle shipment or two: the follower holds the leader's high watermark
    os.kill(cluster.nodes[follower].pid, signal.SIGSTOP)
    try:
        time.sleep(0.05)
        # The first record after the pause may be in the one shipment in flight to the paused
        # follower (it may apply it on resuming); the ones after it cannot reach it.
        produced_offset(cluster, leader, token, "diverge", 0, "probe", "1")
        time.sleep(0.1)
        tail = [produced_offset(cluster, leader, token, "diverge", 0, f"tail-{i}", "1") for i in range(3)]
        assert tail == [6, 7, 8]
        seen = partition(cluster, leader, "diverge", 0, token)
        assert (seen["latest_offset"], seen["log_end_offset"]) == (5, 9), "the tail is above the high watermark"
        assert sorted(seen["in_sync_replicas"]) == sorted(start["replicas"])
        assert fetched(cluster, leader, token, "diverge", 0) == committed, "a reader got an uncommitted record"
        assert [v for _, v in on_disk(cluster, leader, "diverge", 0)][5:] == ["probe", "tail-0", "tail-1", "tail-2"]
        kill(cluster, leader)
    finally:
        os.kill(cluster.nodes[follower].pid, signal.SIGCONT)
    new = wait_until(lambda: (p := partition(cluster, follower, "diverge", 0, token))["leader"] == follower and p,
                     timeout_s=FAILOVER_S)
    assert new["leader_epoch"] > start["leader_epoch"]
    after = [(produced_offset(cluster, follower, token, "diverge", 0, f"after-{i}", "all"), f"after-{i}")
             for i in range(4)]
    cluster.start(leader)
    records = identical_replicas(cluster, token, "diverge", 0)  # healed: the old leader leads again
    assert partition(cluster, follower, "diverge", 0, token)["leader"] == leader
    values = [v for _, v in records]
    assert not [v for v in values if v.startswith("tail-")], f"the divergent tail survived: {records}"
    assert_all_kept(committed + after, records)
    assert values in ([*dict(committed).values(), *dict(after).values()],
                      [*dict(committed).values(), "probe", *dict(after).values()]), records
    # the offsets the old leader had given the tail now hold the new leader's records, on its disk too
    assert on_disk(cluster, leader, "diverge", 0)[6:9] == records[6:9]


def test_a_stopped_follower_leaves_the_isr_and_min_insync_replicas_decides(cluster: Cluster,
                                                                           token: dict[str, str]):
    heal(cluster, token)
    placed = {topic: create(cluster, token, topic, 6, 2, config)
              for topic, config in (("lenient", None), ("strict", {"min_insync_replicas": 2}))}

    def followed_by(node: int, topic: str) -> dict[str, Any] | None:
        return next((p for p in placed[topic] if node in p["replicas"] and p["leader"] != node), None)

    stopped = next(n for n in NODES if all(followed_by(n, topic) for topic in placed))
    chosen = {topic: followed_by(stopped, topic) or {} for topic in placed}
    acked: dict[str, list[tuple[int, str]]] = {topic: [] for topic in chosen}

    def write(topic: str, value: str) -> Any:
        p = chosen[topic]
        reply = produce(cluster, p["leader"], token, topic, p["partition"], value, "all")
        if reply.status == 200:
            acked[topic].append((reply.json()["offsets"][0]["offset"], value))
        return reply

    for topic in chosen:
        assert write(topic, "before").status == 200
    os.kill(cluster.nodes[stopped].pid, signal.SIGSTOP)
    try:
        for topic, p in chosen.items():
            shrunk = wait_until(lambda t=topic, p=p: (s := partition(cluster, p["leader"], t, p["partition"], token))
                                ["in_sync_replicas"] == [p["leader"]] and s,
                                timeout_s=REPLICA_LAG_MS / 1000 + FAILOVER_S)
            assert shrunk["leader"] == p["leader"]
        reply = write("lenient", "during")
        assert reply.status == 200, (reply.status, reply.data[:300])
        p = chosen["strict"]
        before = partition(cluster, p["leader"], "strict", p["partition"], token)
        reply = write("strict", "refused")
        assert reply.status == 503 and reply.json()["code"] == "not_enough_replicas", (reply.status, reply.data)
        after = partition(cluster, p["leader"], "strict", p["partition"], token)
        assert (after["log_end_offset"], after["latest_offset"]) == (before["log_end_offset"],
                                                                     before["latest_offset"]) == (1, 1)
    finally:
        os.kill(cluster.nodes[stopped].pid, signal.SIGCONT)
    for topic, p in chosen.items():
        wait_until(lambda t=topic, p=p: sorted(partition(cluster, p["leader"], t, p["partition"], token)
                                               ["in_sync_replicas"]) == sorted(p["replicas"]), timeout_s=HEAL_S)
    for topic in chosen:
        reply = write(topic, "again")
        assert reply.status == 200, (topic, reply.status, reply.data[:300])
    for topic, p in chosen.items():
        records = identical_replicas(cluster, token, topic, p["partition"])
        assert records == sorted(acked[topic]), (topic, records)
    assert [v for _, v in acked["strict"]] == ["before", "again"]
    assert [v for _, v in acked["lenient"]] == ["before", "during", "again"]


def test_committed_group_offsets_survive_a_failover_of_the_offsets_leader(cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    create(cluster, token, "grouped", 2, 2)
    for p in (0, 1):
        cluster.http(1).json("POST", "/v1/topics/grouped/records?acks=all", headers=token,
                             body={"records": [{"value": f"g{p}-{i}", "partition": p} for i in range(10)]})
    member = cluster.http(2).json("POST", "/v1/groups/fo/members", headers=token,
                                  body={"topics": ["grouped"], "session_timeout_ms": 6000})
    assert sorted(member["assignment"]["grouped"]) == [0, 1]
    committed = {0: 3, 1: 7}
    cluster.http(2).json("POST", "/v1/groups/fo/offsets", headers=token, body={
        "member_id": member["member_id"], "generation": member["generation"],
        "offsets": [{"topic": "grouped", "partition": p, "offset": o} for p, o in committed.items()]})

    def offsets(via: int) -> dict[int, int | None]:
        described = cluster.http(via).json("GET", "/v1/groups/fo", headers=token)
        return {o["partition"]: o["committed_offset"] for o in described["offsets"]}

    assert offsets(3) == committed
    [state] = placement(cluster, 1, OFFSETS_TOPIC, token)
    coordinator = state["leader"]
    assert len(state["replicas"]) == 3, f"{OFFSETS_TOPIC} is not on three replicas (decision 0396): {state}"
    wait_until(lambda: sorted(placement(cluster, 1, OFFSETS_TOPIC, token)[0]["in_sync_replicas"])
               == sorted(state["replicas"]))
    via = next(n for n in NODES if n != coordinator)
    kill(cluster, coordinator)
    try:
        moved = wait_until(lambda: (p := placement(cluster, via, OFFSETS_TOPIC, token)[0])["leader"] not in (
            coordinator, -1) and p, timeout_s=FAILOVER_S)
        assert moved["leader_epoch"] > state["leader_epoch"]
        assert wait_until(lambda: offsets(via) == committed and True, timeout_s=FAILOVER_S)
        # members rejoin the new coordinator and go on committing
        again = wait_until(lambda: cluster.http(via).json("POST", "/v1/groups/fo/members", headers=token,
                                                          body={"topics": ["grouped"], "session_timeout_ms": 6000}),
                           timeout_s=FAILOVER_S)
        assert again["member_id"] != member["member_id"]
        assert offsets(via) == committed
    finally:
        cluster.start(coordinator)
    wait_until(lambda: alive_nodes(cluster, via, token) == dict.fromkeys(NODES, True), timeout_s=HEAL_S)
    assert wait_until(lambda: offsets(coordinator) == committed and True, timeout_s=FAILOVER_S)
