"""``make cluster`` (``logbroker.dev_cluster``): the plan and each node's command line resolve to
three distinct nodes sharing etcd, auth, certificates and secrets, each flag named once; the real
script brings up etcd and three nodes that see each other alive, and one SIGINT stops every process
it started. ``logbroker dev-cluster`` kills a leader while the others keep taking writes, starts it
again and it leads again; the SIGINT then stops the node started again too. etcd's exit stops all."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from logbroker.cli.command import build_parser
from logbroker.config import NodeConfig, resolve
from logbroker.dev_cluster import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    NODE_IDS,
    ClusterError,
    ClusterPlan,
    Secrets,
    check_ports_free,
    etcd_args,
    node_process,
    plan_from_env,
    prepare,
)
from logbroker.rpc_service import rpc_security
from tests.conftest import ROOT
from tests.support.auth import bearer, login
from tests.support.cluster import wait_until
from tests.support.etcd import free_port, free_ports
from tests.support.http import Http
from tests.support.processes import alive

KEYS = Secrets(cluster_token="t" * 43, jwt_secret="j" * 43)
BANNER_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 120.0


def node_config(plan: ClusterPlan, node_id: int) -> NodeConfig:
    """The config node ``node_id`` starts with: its argv through the real ``serve`` parser, its env."""
    process = node_process(plan, node_id, KEYS, {"PATH": "/usr/bin"})
    assert process.args[1:4] == ["-m", "logbroker", "serve"]
    args = build_parser().parse_args(process.args[3:])
    assert process.env is not None
    return resolve({k: v for k, v in vars(args).items() if k not in ("command", "config")}, process.env, None)


def test_each_node_has_its_own_ports_id_and_data_dir_and_the_shared_settings():
    plan = plan_from_env({"CLUSTER_DIR": "/w"})
    configs = [node_config(plan, node_id) for node_id in NODE_IDS]
    assert [c.node_id for c in configs] == [1, 2, 3]
    assert [c.http_port for c in configs] == [8081, 8082, 8083]
    assert [c.rpc_port for c in configs] == [9091, 9092, 9093]
    assert [c.grpc_port for c in configs] == [9094, 9095, 9096]
    assert [c.data_dir for c in configs] == ["/w/node-1", "/w/node-2", "/w/node-3"]
    assert [c.rpc_tls_cert_file for c in configs] == [f"/w/certs/node-{n}.pem" for n in NODE_IDS]
    assert [c.rpc_tls_key_file for c in configs] == [f"/w/certs/node-{n}.key" for n in NODE_IDS]
    for config in configs:
        assert config.coordinator == "etcds://127.0.0.1:2379" and config.http_host == "127.0.0.1"
        assert (config.etcd_ca_file, config.etcd_cert_file, config.etcd_key_file) == \
            ("/w/certs/etcd-ca.pem", "/w/certs/etcd-client.pem", "/w/certs/etcd-client.key")
        assert config.auth == "on" and (config.admin_user, config.admin_password) == (ADMIN_USER, ADMIN_PASSWORD)
        assert (config.cluster_token, config.jwt_secret) == (KEYS.cluster_token, KEYS.jwt_secret)
        assert config.rpc_tls_ca_file == "/w/certs/ca.pem"
        assert rpc_security(config)[0]
    for node_id in NODE_IDS:  # the secrets go through the environment, never the command line
        args = node_process(plan, node_id, KEYS, {}).args
        assert not {KEYS.cluster_token, KEYS.jwt_secret, ADMIN_PASSWORD} & set(args)
        assert not [a for a in args if "password" in a]


def test_a_node_command_line_names_each_flag_once_and_reads_as_what_runs():
    plan = plan_from_env({"CLUSTER_DIR": "/w", "CLUSTER_RACKS": "a,a,b"})
    for node_id in NODE_IDS:
        args = node_process(plan, node_id, KEYS, {}).args[4:]
        flags = args[0::2]
        assert all(flag.startswith("--") for flag in flags) and len(flags) == len(set(flags)), args
        assert args[:4] == ["--node-id", str(node_id), "--data-dir", f"/w/node-{node_id}"]
        assert args[args.index("--auth") + 1] == "on" and "off" not in args
        assert args[args.index("--http-port") + 1] == str(8080 + node_id)


def test_overrides_move_every_port_and_etcd_follows():
    plan = plan_from_env({"CLUSTER_DIR": "/x", "CLUSTER_ETCD_CLIENT_PORT": "3379", "CLUSTER_ETCD_PEER_PORT": "3380",
                          "CLUSTER_HTTP_PORTS": "7001, 7002,7003", "CLUSTER_RPC_PORTS": "7101,7102,7103",
                          "CLUSTER_GRPC_PORTS": "7201,7202,7203", "CLUSTER_KAFKA_PORTS": "7301,7302,7303"})
    assert [node_config(plan, n).http_port for n in NODE_IDS] == [7001, 7002, 7003]
    assert [node_config(plan, n).grpc_port for n in NODE_IDS] == [7201, 7202, 7203]
    assert [node_config(plan, n).kafka_port for n in NODE_IDS] == [7301, 7302, 7303]
    assert {node_config(plan, n).coordinator for n in NODE_IDS} == {"etcds://127.0.0.1:3379"}
    args = etcd_args(plan, "/usr/bin/etcd")
    assert args[args.index("--listen-client-urls") + 1] == "https://127.0.0.1:3379"
    assert args[args.index("--advertise-client-urls") + 1] == "https://127.0.0.1:3379"
    assert args[args.index("--listen-peer-urls") + 1] == "http://127.0.0.1:3380"
    assert args[args.index("--data-dir") + 1] == "/x/etcd"


def test_racks_when_asked_one_per_node():
    assert [node_config(plan_from_env({"CLUSTER_DIR": "/r"}), n).rack for n in NODE_IDS] == ["", "", ""]
    racked = plan_from_env({"CLUSTER_DIR": "/r", "CLUSTER_RACKS": "a, a,b"})
    assert [node_config(racked, n).rack for n in NODE_IDS] == ["a", "a", "b"]


@pytest.mark.parametrize("env", [{"CLUSTER_HTTP_PORTS": "8081,8082"}, {"CLUSTER_RPC_PORTS": "1,2,x"},
                                 {"CLUSTER_ETCD_CLIENT_PORT": "70000"}, {"CLUSTER_HTTP_PORTS": "2379,8082,8083"},
                                 {"CLUSTER_GRPC_PORTS": "9094,9095"}, {"CLUSTER_GRPC_PORTS": "8081,9095,9096"},
                                 {"CLUSTER_KAFKA_PORTS": "9097"}, {"CLUSTER_KAFKA_PORTS": "9094,9098,9099"},
                                 {"CLUSTER_RACKS": "a,b"}, {"CLUSTER_RACKS": "a,,b"}, {"CLUSTER_RACKS": "a,b,\x1b"}])
def test_a_bad_override_is_said(env: dict[str, str]):
    with pytest.raises(ClusterError):
        plan_from_env(env)


def test_a_taken_port_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plan = plan_from_env({"CLUSTER_HTTP_PORTS": f"{free_port()},{port},{free_port()}",
                              "CLUSTER_RPC_PORTS": ",".join(str(free_port()) for _ in NODE_IDS),
                              "CLUSTER_GRPC_PORTS": ",".join(str(free_port()) for _ in NODE_IDS),
                              "CLUSTER_KAFKA_PORTS": ",".join(str(free_port()) for _ in NODE_IDS),
                              "CLUSTER_ETCD_CLIENT_PORT": str(free_port()), "CLUSTER_ETCD_PEER_PORT": str(free_port())})
        with pytest.raises(ClusterError, match=f"port {port} for the node 2 HTTP"):
            check_ports_free(plan)


def test_etcd_serves_tls_to_client_certificates_only():
    plan = plan_from_env({"CLUSTER_DIR": "/w"})
    args = etcd_args(plan, "/usr/bin/etcd")
    assert "--client-cert-auth" in args
    assert args[args.index("--trusted-ca-file") + 1] == "/w/certs/etcd-ca.pem"
    assert args[args.index("--cert-file") + 1] == "/w/certs/etcd-server.pem"
    assert args[args.index("--key-file") + 1] == "/w/certs/etcd-server.key"


def test_certificates_and_secrets_are_made_once_and_kept_private(tmp_path):
    plan = ClusterPlan(work_dir=str(tmp_path / "c"))
    first = prepare(plan)
    files = {name: os.stat(os.path.join(plan.certs_dir, name)).st_mtime_ns
             for name in ("ca.pem", *(f"node-{n}.{e}" for n in NODE_IDS for e in ("pem", "key")),
                          *(f"etcd-{w}.{e}" for w in ("ca", "server", "client") for e in ("pem", "key")))}
    assert prepare(plan) == first and len(first.jwt_secret) >= 32 and first.jwt_secret != first.cluster_token
    assert {name: os.stat(os.path.join(plan.certs_dir, name)).st_mtime_ns for name in files} == files
    for name in ("cluster-token", "jwt-secret"):
        assert stat.S_IMODE(os.stat(os.path.join(plan.secrets_dir, name)).st_mode) == 0o600


class Supervisor:
    """``python -m logbroker.dev_cluster`` with its stdout collected by a thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen([sys.executable, "-m", "logbroker.dev_cluster"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            if len(into) < 10_000:
                into.append(line)

    def pids(self) -> dict[str, int]:
        text = "".join(self.out)
        found = {f"node {m[0]}": int(m[1]) for m in re.findall(r"node (\d+): \S+ .*?\(pid (\d+)\)", text)}
        etcd = re.search(r"etcd at \S+ \(pid (\d+)\)", text)
        if etcd:
            found["etcd"] = int(etcd.group(1))
        return found



def cluster_ports() -> dict[str, str]:
    """Every port setting of ``make cluster``, all different and free."""
    ports = [str(p) for p in free_ports(4 * len(NODE_IDS) + 2)]
    n = len(NODE_IDS)
    return {"CLUSTER_HTTP_PORTS": ",".join(ports[:n]), "CLUSTER_RPC_PORTS": ",".join(ports[n:2 * n]),
            "CLUSTER_GRPC_PORTS": ",".join(ports[2 * n:3 * n]), "CLUSTER_KAFKA_PORTS": ",".join(ports[3 * n:4 * n]),
            "CLUSTER_ETCD_CLIENT_PORT": ports[-2], "CLUSTER_ETCD_PEER_PORT": ports[-1]}


@contextlib.contextmanager
def running_script(tmp_path: Any) -> Iterator[tuple[Supervisor, list[str], dict[str, int]]]:
    """The script on free ports in a temp work dir, until its banner; then the supervisor, the
    node URLs and the PIDs it printed. Afterwards a supervisor still running is sent SIGINT (its
    ordered stop), then SIGKILL with its children by PID, each wait bounded."""
    ports = cluster_ports()
    http_ports, grpc_ports = ports["CLUSTER_HTTP_PORTS"].split(","), ports["CLUSTER_GRPC_PORTS"].split(",")
    kafka_ports = ports["CLUSTER_KAFKA_PORTS"].split(",")
    env = {**os.environ, "PYTHONPATH": ROOT, "CLUSTER_DIR": str(tmp_path / "cluster"), **ports,
           "CLUSTER_RACKS": "a,a,b"}
    supervisor = Supervisor(env)
    try:
        wait_until(lambda: supervisor.proc.poll() is not None or any("Ctrl-C" in line for line in supervisor.out),
                   timeout_s=BANNER_TIMEOUT_S)
        assert supervisor.proc.poll() is None, "".join(supervisor.err)
        pids = supervisor.pids()
        assert set(pids) == {"etcd", "node 1", "node 2", "node 3"} and all(alive(p) for p in pids.values())
        urls = [f"http://127.0.0.1:{port}" for port in http_ports]
        assert all(url in "".join(supervisor.out) for url in urls)
        assert all(f"gRPC 127.0.0.1:{port}" in "".join(supervisor.out) for port in grpc_ports)
        assert all(f"Kafka 127.0.0.1:{port}" in "".join(supervisor.out) for port in kafka_ports)
        yield supervisor, urls, pids
    finally:
        if supervisor.proc.poll() is None:
            supervisor.proc.send_signal(signal.SIGINT)
            try:
                supervisor.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                supervisor.proc.kill()
                supervisor.proc.wait(timeout=STOP_TIMEOUT_S)
                for pid in supervisor.pids().values():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


def test_make_cluster_brings_up_three_nodes_and_sigint_stops_every_process(tmp_path):
    with running_script(tmp_path) as (supervisor, urls, pids):
        for name, pid in pids.items():  # the admin's password and the secrets are in no process list
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            assert ADMIN_PASSWORD.encode() not in cmdline and b"password" not in cmdline, name
            for secret in ("cluster-token", "jwt-secret"):
                with open(tmp_path / "cluster" / "secrets" / secret, "rb") as f:
                    assert f.read().strip() not in cmdline, (name, secret)
        etcd_port = int(supervisor.env["CLUSTER_ETCD_CLIENT_PORT"])
        no_client_cert = ssl.create_default_context(cafile=str(tmp_path / "cluster" / "certs" / "etcd-ca.pem"))
        for url, context in ((f"http://127.0.0.1:{etcd_port}/v3/kv/range", None),
                             (f"https://127.0.0.1:{etcd_port}/v3/kv/range", no_client_cert)):
            with pytest.raises((urllib.error.URLError, OSError)):  # etcd lets no one in without its certificate
                urllib.request.urlopen(urllib.request.Request(url, data=b'{"key":"AA=="}'), timeout=5, context=context)
        token = bearer(login(Http(urls[0]), ADMIN_USER, ADMIN_PASSWORD))  # issued by node 1, used on all
        for url in urls:
            def all_alive_in_racks(url: str = url) -> bool:
                nodes = Http(url).json("GET", "/v1/cluster", headers=token)["nodes"]
                return {n["node_id"]: (n["alive"], n["rack"]) for n in nodes} == \
                    {1: (True, "a"), 2: (True, "a"), 3: (True, "b")}
            wait_until(all_alive_in_racks)
        supervisor.proc.send_signal(signal.SIGINT)
        assert supervisor.proc.wait(timeout=STOP_TIMEOUT_S) == 0, "".join(supervisor.err)
        assert not [name for name, pid in pids.items() if alive(pid)]
        assert "SIGINT: stopping the cluster" in "".join(supervisor.err)


def dev_cluster(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``logbroker dev-cluster ARGS`` as a user runs it, against the cluster of ``env``."""
    return subprocess.run([sys.executable, "-m", "logbroker", "dev-cluster", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def cluster_status(env: dict[str, str]) -> dict[str, Any]:
    done = dev_cluster(env, "status", "--json")
    assert done.returncode == 0, done.stderr
    state: dict[str, Any] = json.loads(done.stdout)
    return state


def _partition(url: str, token: dict[str, str]) -> dict[str, Any]:
    described = Http(url).json("GET", "/v1/topics/failover", headers=token)
    partition: dict[str, Any] = described["partitions"][0]
    return partition


def _produce(url: str, token: dict[str, str], value: str) -> bool:
    """One acks=all record to partition 0 through ``url``; safe to repeat (an idempotency key)."""
    reply = Http(url).call("POST", "/v1/topics/failover/records?acks=all", headers={**token, "Idempotency-Key": value},
                           body={"records": [{"value": value, "partition": 0}]})
    return reply.status == 200


def _values(url: str, token: dict[str, str]) -> list[str]:
    fetched = Http(url).json("GET", "/v1/topics/failover/partitions/0/records?offset=0", headers=token)
    return [r["value"] for r in fetched["records"]]


def test_kill_a_leader_writes_go_on_start_it_it_leads_again_and_sigint_stops_it(tmp_path):
    with running_script(tmp_path) as (supervisor, urls, pids):
        env = supervisor.env
        state = cluster_status(env)
        assert {n["node_id"]: n["pid"] for n in state["nodes"]} == {n: pids[f"node {n}"] for n in NODE_IDS}
        assert state["etcd"]["pid"] == pids["etcd"] and state["launcher_pid"] == supervisor.proc.pid
        url_of = {n["node_id"]: n["http_url"] for n in state["nodes"]}
        assert [url_of[n] for n in NODE_IDS] == urls
        token = bearer(login(Http(urls[0]), ADMIN_USER, ADMIN_PASSWORD))
        Http(urls[0]).json("POST", "/v1/topics", expect=201, headers=token,
                           body={"name": "failover", "partitions": 3, "replication_factor": 3})
        leader = wait_until(lambda: _partition(urls[0], token)["leader"] in NODE_IDS and
                            _partition(urls[0], token)["leader"])
        assert wait_until(lambda: _produce(urls[0], token, "before"))
        others = [n for n in NODE_IDS if n != leader]
        text = dev_cluster(env, "status").stdout
        assert f"node {leader}  pid {pids[f'node {leader}']}" in text and "leads failover/0" in text

        killed = dev_cluster(env, "kill", str(leader))
        assert killed.returncode == 0, killed.stderr
        assert killed.stdout == f"node {leader} (pid {pids[f'node {leader}']}) killed (SIGKILL), exit code -9\n"
        assert not alive(pids[f"node {leader}"]) and supervisor.proc.poll() is None
        assert all(alive(pids[f"node {n}"]) for n in others) and alive(pids["etcd"])
        via = url_of[others[0]]
        assert wait_until(lambda: _produce(via, token, "during"), timeout_s=60)  # another node leads now
        assert _partition(via, token)["leader"] in others
        down = {n["node_id"]: n for n in cluster_status(env)["nodes"]}[leader]
        assert (down["pid"], down["state"], down["exit_code"]) == (None, "down", -9)
        assert f"node {leader}  down (exited with -9)" in dev_cluster(env, "status").stdout
        for args, said in ((("kill", str(leader)), f"node {leader} is already down"),
                           (("stop", str(leader)), f"node {leader} is already down"),
                           (("start", str(others[0])), f"node {others[0]} is already running"),
                           (("kill", "9"), "no node 9 in this cluster")):
            refused = dev_cluster(env, *args)
            assert refused.returncode == 1 and said in refused.stderr, (args, refused.stderr)
        second = Supervisor({**env, **cluster_ports()})
        assert second.proc.wait(timeout=STOP_TIMEOUT_S) == 1  # one launcher per work dir
        assert "already running" in "".join(second.err)

        started = dev_cluster(env, "start", str(leader))
        assert started.returncode == 0, started.stderr
        back = {n["node_id"]: n for n in cluster_status(env)["nodes"]}[leader]
        assert back["pid"] not in (None, pids[f"node {leader}"]) and alive(back["pid"])
        assert started.stdout == f"node {leader} started (pid {back['pid']}), ready at {url_of[leader]}\n"
        assert back["argv"] == state["nodes"][NODE_IDS.index(leader)]["argv"]  # the same command line
        wait_until(lambda: _partition(url_of[leader], token)["leader"] == leader, timeout_s=90)  # failback
        assert wait_until(lambda: _produce(url_of[leader], token, "after"))
        assert _values(url_of[leader], token) == ["before", "during", "after"]

        stopped = dev_cluster(env, "stop", str(others[1]))
        assert stopped.returncode == 0 and "stopped (SIGTERM)" in stopped.stdout, stopped.stderr
        assert not alive(pids[f"node {others[1]}"])
        supervisor.proc.send_signal(signal.SIGINT)
        assert supervisor.proc.wait(timeout=STOP_TIMEOUT_S) == 0, "".join(supervisor.err)
        assert not [pid for pid in (*pids.values(), back["pid"]) if alive(pid)]
        assert f"node {leader} (pid {back['pid']})" in "".join(supervisor.err).splitlines()[-1]  # "stopped: ..."
        assert dev_cluster(env, "status").returncode == 1  # nothing answers any more


def test_etcd_that_exits_stops_the_cluster_and_is_named(tmp_path):
    with running_script(tmp_path) as (supervisor, _, pids):
        os.kill(pids["etcd"], signal.SIGKILL)
        assert supervisor.proc.wait(timeout=STOP_TIMEOUT_S) == 1
        assert f"etcd (pid {pids['etcd']}) exited with -9" in "".join(supervisor.err)
        assert not [name for name, pid in pids.items() if alive(pid)]
