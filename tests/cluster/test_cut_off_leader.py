"""A leader that is alive but cut off keeps its partitions until its lease lapses (decision 0260):
only a crash ends a session early. Real nodes and etcd, each in a network namespace
(``chaos.network``), the leader's lease 6 s:

- cut from its peers (a blackhole route between it and one follower; the other follower's
  firewall rejects its traffic with TCP resets, so that follower sees its connections refused,
  as it would see a crashed node's): the leader keeps its session (it still reaches etcd) and
  its partition, however long the cut lasts; the rejecting follower recorded itself as a
  witness, but one witness ends nothing;
- isolated (its link down: no peer, no etcd): its partition moves only once its lease has
  lapsed, never before two thirds of the TTL (its last keepalive was at most a third of the TTL
  before the cut);
- writers with ``acks=all`` through the leader and through a follower all along: every
  acknowledged record is found at its acknowledged offset afterwards, and no offset was
  acknowledged for two different records (no two leaders acknowledged writes).
Skipped, saying why, where the machine refuses namespaces or nftables."""

from __future__ import annotations

import contextlib
import http.client as httpclient
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from chaos.cluster import ADMIN, PASSWORD, ChaosCluster
from chaos.network import ETCD, Network, NetworkUnavailableError
from tests.support.auth import bearer, login
from tests.support.cluster import wait_until
from tests.support.http import Http

LEASE_MS = 6_000
CUT_S = 2 * LEASE_MS / 1000
TOPIC = "cutoff"
CALL_TIMEOUT_S = 5.0
SAMPLE_S = 0.05


class QuickHttp(Http):
    """Calls that give up after ``CALL_TIMEOUT_S`` (a cut node answers nothing)."""

    def connect(self) -> httpclient.HTTPConnection:
        return httpclient.HTTPConnection(self.host, self.port, timeout=CALL_TIMEOUT_S)


def nft(network: Network, member: str, *args: str) -> None:
    done = subprocess.run([*network.exec_prefix(member), "nft", *args], capture_output=True, text=True,
                          timeout=10, check=False)
    if done.returncode != 0:
        raise NetworkUnavailableError(f"nft {' '.join(args)}: {done.stderr.strip()}")


def reject_towards(network: Network, member: str, peer: str) -> None:
    """``member``'s firewall answers every TCP packet it sends to ``peer`` with a reset to itself
    (its connections to ``peer`` are refused at once; nothing reaches ``peer``)."""
    nft(network, member, "add", "table", "inet", "lbtest")
    nft(network, member, "add", "chain", "inet", "lbtest", "out", "{ type filter hook output priority 0 ; }")
    nft(network, member, "add", "rule", "inet", "lbtest", "out", "ip", "daddr", network.address[peer],
        "meta", "l4proto", "tcp", "reject", "with", "tcp", "reset")


@pytest.fixture(scope="module")
def namespaced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChaosCluster, Network]]:
    try:
        network = Network.create([ETCD, "node-1", "node-2", "node-3"], prefix=f"w{os.getpid() % 1000}")
    except NetworkUnavailableError as exc:
        pytest.skip(f"network namespaces refused here: {exc}")
    try:
        try:
            nft(network, "node-1", "list", "tables")
        except (NetworkUnavailableError, OSError) as exc:
            pytest.skip(f"nftables unavailable here: {exc}")
        cluster = ChaosCluster(str(tmp_path_factory.mktemp("cutoff")), 3, network=network, lease_ttl_ms=LEASE_MS)
        try:
            cluster.start()
            yield cluster, network
        finally:
            cluster.stop()
    finally:
        network.close()


class Writer:
    """``acks=all`` produces through one node, one at a time, until stopped: the acknowledged
    (offset, value) pairs."""

    def __init__(self, url: str, token: dict[str, str], name: str) -> None:
        self.http, self.token, self.name = QuickHttp(url), token, name
        self.acked: list[tuple[int, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            value = f"{self.name}-{n}"
            n += 1
            try:
                reply = self.http.call("POST", f"/v1/topics/{TOPIC}/records?acks=all", headers=self.token,
                                       body={"records": [{"value": value}]})
            except OSError:
                time.sleep(0.05)
                continue
            if reply.status == 200:
                self.acked.append((int(reply.json()["offsets"][0]["offset"]), value))
            else:
                time.sleep(0.05)


class Sampler:
    """The partition's leader as one node shows it, every ``SAMPLE_S``: (monotonic time sent, leader)."""

    def __init__(self, url: str, token: dict[str, str]) -> None:
        self.http, self.token = QuickHttp(url), token
        self.seen: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            with contextlib.suppress(OSError, ValueError, KeyError, StopIteration):
                self.seen.append((sent, int(placement(self.http, self.token)["leader"])))
            time.sleep(SAMPLE_S)


def placement(http: Http, token: dict[str, str]) -> dict[str, Any]:
    """The partition's placement from one node's metadata cache (``GET /v1/cluster`` asks no other node)."""
    answer = http.json("GET", "/v1/cluster", headers=token)
    return dict(next(t for t in answer["topics"] if t["name"] == TOPIC)["partitions"][0])


def partition(cluster: ChaosCluster, via: int, token: dict[str, str]) -> dict[str, Any]:
    return placement(QuickHttp(cluster.urls[via]), token)


def in_sync(cluster: ChaosCluster, via: int, token: dict[str, str]) -> dict[str, Any]:
    return wait_until(lambda: (p := partition(cluster, via, token)) and p["leader"] != -1
                      and len(p["in_sync_replicas"]) == 3 and p, timeout_s=90)


def alive(cluster: ChaosCluster, via: int, token: dict[str, str]) -> set[int]:
    answer = QuickHttp(cluster.urls[via]).json("GET", "/v1/cluster", headers=token)
    return {int(n["node_id"]) for n in answer["nodes"] if n["alive"]}


def test_a_cut_off_leader_keeps_its_partition_until_its_lease_lapses(namespaced: tuple[ChaosCluster, Network]):
    cluster, network = namespaced
    token = bearer(login(QuickHttp(cluster.urls[1]), ADMIN, PASSWORD))
    QuickHttp(cluster.urls[1]).json("POST", "/v1/topics", expect=201, headers=token,
                                    body={"name": TOPIC, "partitions": 1, "replication_factor": 3})
    leader = int(in_sync(cluster, 1, token)["leader"])
    rejecting, blackholed = (n for n in (1, 2, 3) if n != leader)
    writers = [Writer(cluster.urls[leader], token, "direct"), Writer(cluster.urls[rejecting], token, "forwarded")]
    for writer in writers:
        writer.thread.start()
    try:
        wait_until(lambda: all(w.acked for w in writers))

        # 1. Cut from its peers, not from etcd: a session ends only on a crash, and one witness is not enough.
        sampler = Sampler(cluster.urls[blackholed], token)
        sampler.thread.start()
        reject_towards(network, f"node-{rejecting}", f"node-{leader}")
        network.cut(f"node-{leader}", f"node-{blackholed}")
        cut = time.monotonic()
        time.sleep(CUT_S)
        sampler.stop.set()
        sampler.thread.join(timeout=30)
        assert len(sampler.seen) > 20 and {seen for _, seen in sampler.seen} == {leader}, \
            "the cut-off leader kept its partition"
        assert time.monotonic() - cut >= CUT_S
        assert leader in alive(cluster, blackholed, token), "and its session"
        with open(os.path.join(cluster.logs, f"node-{rejecting}.log"), encoding="utf-8") as f:
            assert f"node {leader} refuses connections on every address" in f.read(), \
                "the rejecting follower did see the leader refuse (and recorded itself as a witness)"
        nft(network, f"node-{rejecting}", "delete", "table", "inet", "lbtest")
        network.heal()
        leader = int(in_sync(cluster, rejecting, token)["leader"])
        survivor = next(n for n in (1, 2, 3) if n != leader)

        # 2. Isolated (no etcd either): the partition moves once the lease lapsed, not before.
        sampler = Sampler(cluster.urls[survivor], token)
        sampler.thread.start()
        network.isolate(f"node-{leader}")
        isolated = time.monotonic()
        wait_until(lambda: any(seen not in (-1, leader) for _, seen in sampler.seen), timeout_s=LEASE_MS / 1000 + 30)
        sampler.stop.set()
        sampler.thread.join(timeout=30)
        moved_at = next(at for at, seen in sampler.seen if seen not in (-1, leader))
        assert moved_at - isolated >= LEASE_MS / 1000 * 2 / 3 - 0.5, \
            f"the partition moved {moved_at - isolated:.2f} s after the cut, before the lease could lapse"
        network.heal()
        in_sync(cluster, survivor, token)
    finally:
        network.heal()
        for writer in writers:
            writer.stop.set()
        for writer in writers:
            writer.thread.join(timeout=30)

    acked = [pair for writer in writers for pair in writer.acked]
    by_offset: dict[int, set[str]] = {}
    for offset, value in acked:
        by_offset.setdefault(offset, set()).add(value)
    assert all(len(values) == 1 for values in by_offset.values()), "an offset acknowledged for two records"
    end = max(by_offset) + 1
    stored: dict[int, str] = {}
    while len(stored) < end:
        answer = QuickHttp(cluster.urls[survivor]).json(
            "GET", f"/v1/topics/{TOPIC}/partitions/0/records?offset={len(stored)}", headers=token)
        if not answer["records"]:
            break
        stored.update({int(r["offset"]): r["value"] for r in answer["records"]})
    lost = {offset: values for offset, values in by_offset.items() if stored.get(offset) not in values}
    assert not lost, f"acknowledged records not found at their offsets: {sorted(lost.items())[:5]}"
