"""``make cluster``: a real etcd and three ``logbroker serve`` nodes on loopback, stopped together;
one node can be stopped, killed and started again while the others serve.

The work dir (``CLUSTER_DIR``, default ``./.data/cluster``) is reused across runs, so topics and
records survive a restart: ``etcd/`` (etcd's data), ``node-<id>/`` (each node's data dir),
``certs/`` (a development CA and node certificates for the internal RPC's mutual TLS, and etcd's
own CA with its server and the nodes' client certificate, made once by ``logbroker certs``' code),
``secrets/`` (the cluster token and the shared JWT signing key, made once, mode 0600) and
``logs/`` (one file per process). etcd serves its clients over TLS only and requires the client
certificate (``--client-cert-auth``); the nodes reach it at ``etcds://``. Secrets and the admin's
password go to the nodes through their environment, never their command line (which every local
user can read in ``/proc/<pid>/cmdline``). Ports are fixed so the printed URLs stay valid from run to run
(etcd 2379/2380, HTTP 8081-8083, RPC 9091-9093, gRPC 9094-9096, Kafka 9097-9099), overridable
by ``CLUSTER_ETCD_CLIENT_PORT``, ``CLUSTER_ETCD_PEER_PORT``, ``CLUSTER_HTTP_PORTS``,
``CLUSTER_RPC_PORTS``, ``CLUSTER_GRPC_PORTS`` and ``CLUSTER_KAFKA_PORTS`` (comma-separated, one
per node); a port that is taken is said before anything starts. ``CLUSTER_RACKS`` (say ``a,a,b``)
gives the nodes racks, so rack-aware placement and nearest-replica reads can be tried on one machine.

The children run in process groups of their own, so a terminal's Ctrl-C reaches only this
supervisor, which stops them in order: the nodes (SIGTERM, SIGKILL after a bound), then etcd, each
by PID. It does the same on SIGTERM and when etcd exits. A node that exits leaves the others
serving (the supervisor says which, once), so failover can be watched; ``logbroker dev-cluster
status|stop N|kill N|start N`` asks the supervisor, through ``control.sock`` in the work dir
(``dev_cluster_control``), to act on one node, and the supervisor owns a node started again like
the first ones (``dev_cluster_nodes``). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, Final

from coordinator.models import validate_rack
from logbroker.certs import CA_CERT, CA_KEY, etcd_files, generate, generate_etcd
from logbroker.dev_cluster_control import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    NODE_IDS,
    NODE_START_TIMEOUT_S,
    ControlError,
    ControlServer,
    Request,
    work_dir_from_env,
)
from logbroker.dev_cluster_nodes import NodeSlots
from logbroker.launcher import NodeProcess
from segments.errors import InvalidArgumentError

DEFAULT_HTTP_PORTS: Final = (8081, 8082, 8083)
DEFAULT_RPC_PORTS: Final = (9091, 9092, 9093)
DEFAULT_GRPC_PORTS: Final = (9094, 9095, 9096)
DEFAULT_KAFKA_PORTS: Final = (9097, 9098, 9099)
HOST: Final = "127.0.0.1"
SECRET_BYTES: Final = 32  # token_urlsafe(32): 43 characters, above jwt_secret's 32-byte floor
ETCD_HEALTH_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 15.0
POLL_S: Final = 0.2


class ClusterError(Exception):
    """Something the user must fix or look at (a taken port, a missing etcd, a child that died)."""


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
    work_dir: str
    etcd_client_port: int = 2379
    etcd_peer_port: int = 2380
    http_ports: tuple[int, ...] = DEFAULT_HTTP_PORTS
    rpc_ports: tuple[int, ...] = DEFAULT_RPC_PORTS
    grpc_ports: tuple[int, ...] = DEFAULT_GRPC_PORTS
    kafka_ports: tuple[int, ...] = DEFAULT_KAFKA_PORTS
    racks: tuple[str, ...] = ()  # one per node, or none

    @property
    def etcd_url(self) -> str:
        return f"etcds://{HOST}:{self.etcd_client_port}"

    @property
    def etcd_certs(self) -> dict[str, str]:
        return etcd_files(self.certs_dir)

    @property
    def certs_dir(self) -> str:
        return os.path.join(self.work_dir, "certs")

    @property
    def secrets_dir(self) -> str:
        return os.path.join(self.work_dir, "secrets")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.work_dir, "logs")

    def data_dir(self, node_id: int) -> str:
        return os.path.join(self.work_dir, f"node-{node_id}")

    def http_url(self, node_id: int) -> str:
        return f"http://{HOST}:{self.http_ports[NODE_IDS.index(node_id)]}"

    def ports(self) -> list[tuple[int, str]]:
        """Every port this cluster listens on, with what listens there."""
        named = [(self.etcd_client_port, "etcd client (CLUSTER_ETCD_CLIENT_PORT)"),
                 (self.etcd_peer_port, "etcd peer (CLUSTER_ETCD_PEER_PORT)")]
        for node_id, http, rpc, grpc, kafka in zip(NODE_IDS, self.http_ports, self.rpc_ports, self.grpc_ports,
                                                   self.kafka_ports, strict=True):
            named += [(http, f"node {node_id} HTTP (CLUSTER_HTTP_PORTS)"),
                      (rpc, f"node {node_id} RPC (CLUSTER_RPC_PORTS)"),
                      (grpc, f"node {node_id} gRPC (CLUSTER_GRPC_PORTS)"),
                      (kafka, f"node {node_id} Kafka (CLUSTER_KAFKA_PORTS)")]
        return named


@dataclasses.dataclass(frozen=True)
class Secrets:
    cluster_token: str
    jwt_secret: str


def _port(raw: str, name: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise ClusterError(f"{name} must be a port number, not {raw!r}") from None
    if not 1 <= port <= 65535:
        raise ClusterError(f"{name} must be in [1, 65535], not {port}")
    return port


def _rack(raw: str) -> bool:
    try:
        return validate_rack(raw) is not None
    except InvalidArgumentError:
        return False


def plan_from_env(env: Mapping[str, str]) -> ClusterPlan:
    """The plan: defaults, overridden by the ``CLUSTER_*`` variables; every port distinct."""
    lists: dict[str, tuple[int, ...]] = {}
    for name, default in (("CLUSTER_HTTP_PORTS", DEFAULT_HTTP_PORTS), ("CLUSTER_RPC_PORTS", DEFAULT_RPC_PORTS),
                          ("CLUSTER_GRPC_PORTS", DEFAULT_GRPC_PORTS), ("CLUSTER_KAFKA_PORTS", DEFAULT_KAFKA_PORTS)):
        raw = env.get(name)
        lists[name] = default if raw is None else tuple(_port(p.strip(), name) for p in raw.split(","))
        if len(lists[name]) != len(NODE_IDS):
            raise ClusterError(f"{name} must list {len(NODE_IDS)} ports, one per node, not {raw!r}")
    racks: tuple[str, ...] = ()
    if env.get("CLUSTER_RACKS"):
        racks = tuple(r.strip() for r in env["CLUSTER_RACKS"].split(","))
        if len(racks) != len(NODE_IDS) or not all(_rack(r) for r in racks):
            raise ClusterError(f"CLUSTER_RACKS must name {len(NODE_IDS)} racks, one per node, not "
                               f"{env['CLUSTER_RACKS'][:200]!r}")
    plan = ClusterPlan(work_dir=work_dir_from_env(env),
                       etcd_client_port=_port(env.get("CLUSTER_ETCD_CLIENT_PORT", "2379"), "CLUSTER_ETCD_CLIENT_PORT"),
                       etcd_peer_port=_port(env.get("CLUSTER_ETCD_PEER_PORT", "2380"), "CLUSTER_ETCD_PEER_PORT"),
                       http_ports=lists["CLUSTER_HTTP_PORTS"], rpc_ports=lists["CLUSTER_RPC_PORTS"],
                       grpc_ports=lists["CLUSTER_GRPC_PORTS"], kafka_ports=lists["CLUSTER_KAFKA_PORTS"], racks=racks)
    ports = [port for port, _ in plan.ports()]
    if len(set(ports)) != len(ports):
        raise ClusterError(f"the cluster's ports must all differ: {ports}")
    return plan


def etcd_args(plan: ClusterPlan, binary: str) -> list[str]:
    """One etcd member on loopback with its data under the work dir, serving its clients over TLS
    to those holding a certificate of its CA."""
    client, peer = f"https://{HOST}:{plan.etcd_client_port}", f"http://{HOST}:{plan.etcd_peer_port}"
    certs = plan.etcd_certs
    return [binary, "--name", "logbroker-dev", "--data-dir", os.path.join(plan.work_dir, "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--client-cert-auth", "--trusted-ca-file", certs["ca"],
            "--cert-file", certs["server_cert"], "--key-file", certs["server_key"],
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"logbroker-dev={peer}", "--initial-cluster-state", "new",
            "--log-level", "warn", "--logger", "zap"]


def node_process(plan: ClusterPlan, node_id: int, keys: Secrets, base_env: Mapping[str, str],
                 cwd: str | None = None) -> NodeProcess:
    """Node ``node_id``'s process, not started: its own ports and data dir, the shared etcd, auth,
    admin, RPC and etcd certificates and (through the environment) the admin's password and the
    shared secrets."""
    index = NODE_IDS.index(node_id)
    certs, etcd = plan.certs_dir, plan.etcd_certs
    extra: tuple[str, ...] = (
        "--http-host", HOST, "--http-port", str(plan.http_ports[index]),
        "--rpc-port", str(plan.rpc_ports[index]), "--grpc-port", str(plan.grpc_ports[index]),
        "--kafka-port", str(plan.kafka_ports[index]), "--coordinator", plan.etcd_url,
        "--etcd-ca-file", etcd["ca"], "--etcd-cert-file", etcd["client_cert"], "--etcd-key-file", etcd["client_key"],
        "--auth", "on", "--admin-user", ADMIN_USER,
        "--rpc-tls-ca-file", os.path.join(certs, CA_CERT),
        "--rpc-tls-cert-file", os.path.join(certs, f"node-{node_id}.pem"),
        "--rpc-tls-key-file", os.path.join(certs, f"node-{node_id}.key"))
    if plan.racks:
        extra += ("--rack", plan.racks[index])
    env = {**base_env, "LOGBROKER_CLUSTER_TOKEN": keys.cluster_token, "LOGBROKER_JWT_SECRET": keys.jwt_secret,
           "LOGBROKER_ADMIN_PASSWORD": ADMIN_PASSWORD}
    return NodeProcess(plan.data_dir(node_id), *extra, node_id=node_id, cwd=cwd, env=env,
                       log_path=os.path.join(plan.logs_dir, f"node-{node_id}.log"), own_process_group=True)


def check_ports_free(plan: ClusterPlan) -> None:
    """Fail, naming the port and its override, when something already listens on one of them."""
    for port, what in plan.ports():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no conflict
            try:
                s.bind((HOST, port))
            except OSError as exc:
                raise ClusterError(f"port {port} for the {what} on {HOST} is taken ({exc.strerror}); stop what "
                                   "listens there (a `make cluster` still running?) or choose another port") from None


def _secret(path: str) -> str:
    """The secret in ``path``, made (mode 0600) when missing."""
    if os.path.exists(path):
        os.chmod(path, 0o600)
        with open(path, encoding="ascii") as f:
            value = f.read().strip()
        if len(value) < SECRET_BYTES:
            raise ClusterError(f"{path} holds fewer than {SECRET_BYTES} characters; delete it to make a new one")
        return value
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    value = secrets.token_urlsafe(SECRET_BYTES)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(value + "\n")
    return value


def prepare(plan: ClusterPlan) -> Secrets:
    """The work dir, certificates and secrets: made on the first run, reused after."""
    for path in (plan.work_dir, plan.logs_dir, *(plan.data_dir(n) for n in NODE_IDS)):
        os.makedirs(path, exist_ok=True)
    os.makedirs(plan.secrets_dir, mode=0o700, exist_ok=True)
    certs = plan.certs_dir
    missing = [n for n in NODE_IDS
               if not all(os.path.exists(os.path.join(certs, f"node-{n}.{ext}")) for ext in ("pem", "key"))]
    if missing or not all(os.path.exists(os.path.join(certs, name)) for name in (CA_CERT, CA_KEY)):
        generate(certs, missing or list(NODE_IDS))
    if not all(os.path.exists(path) for path in plan.etcd_certs.values()):
        generate_etcd(certs)
    return Secrets(cluster_token=_secret(os.path.join(plan.secrets_dir, "cluster-token")),
                   jwt_secret=_secret(os.path.join(plan.secrets_dir, "jwt-secret")))


class EtcdProcess:
    """The cluster's etcd, logging to a file, stopped by PID (SIGTERM, SIGKILL after a bound)."""

    def __init__(self, args: Sequence[str], log_path: str, client_port: int, certs: Mapping[str, str]) -> None:
        self.args = list(args)
        self.log_path = log_path
        self.client_port = client_port
        self.certs = certs
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> EtcdProcess:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT, process_group=0)
        deadline = time.monotonic() + ETCD_HEALTH_TIMEOUT_S
        try:
            while not self._healthy():
                if self.proc.poll() is not None:
                    raise ClusterError(f"etcd exited with {self.proc.returncode}; see {self.log_path}")
                if time.monotonic() >= deadline:
                    raise ClusterError(f"etcd not healthy within {ETCD_HEALTH_TIMEOUT_S:g} s; see {self.log_path}")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def _healthy(self) -> bool:
        try:
            context = ssl.create_default_context(cafile=self.certs["ca"])
            context.load_cert_chain(self.certs["client_cert"], self.certs["client_key"])
            with urllib.request.urlopen(f"https://{HOST}:{self.client_port}/health", timeout=1.0,
                                        context=context) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None


class _Stop(Exception):
    """Raised in the main thread by SIGINT or SIGTERM."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def banner(plan: ClusterPlan, nodes: Sequence[NodeProcess], etcd_pid: int) -> str:
    """What the user reads once the cluster is up: URLs, credentials and curl lines to paste."""
    first, last = plan.http_url(NODE_IDS[0]), plan.http_url(NODE_IDS[-1])
    auth = '-H "Authorization: Bearer $TOKEN"'
    json_type = "-H 'Content-Type: application/json'"
    login = json.dumps({"username": ADMIN_USER, "password": ADMIN_PASSWORD}, separators=(",", ":"))
    lines = [f"LogBroker cluster: etcd at {HOST}:{plan.etcd_client_port} (pid {etcd_pid}) and {len(nodes)} nodes, "
             f"data in {plan.work_dir} (kept across runs), logs in {plan.logs_dir}"]
    racks = dict(zip(NODE_IDS, plan.racks, strict=False))
    lines += [f"  node {n.node_id}: {n.url}   gRPC {n.grpc_address}   Kafka {n.kafka_address}"
              + (f"   rack {racks[n.node_id]}" if n.node_id in racks else "") + f"   (pid {n.pid})" for n in nodes]
    etcd = plan.etcd_certs
    lines += [f"  etcd:   TLS, client certificates only: etcdctl --endpoints https://{HOST}:{plan.etcd_client_port} "
              f"--cacert {etcd['ca']} --cert {etcd['client_cert']} --key {etcd['client_key']} get --prefix /logbroker/",
              f"  admin:  {ADMIN_USER} / {ADMIN_PASSWORD}   (development credentials; auth is on; any node answers)",
              f"  token:  export TOKEN=$(curl -s -XPOST {first}/v1/auth/token {json_type} -d '{login}' | "
              "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')",
              f"  try:    curl -s -XPOST {first}/v1/topics {auth} {json_type} "
              "-d '{\"name\":\"demo\",\"partitions\":6,\"replication_factor\":2}'",
              f"          curl -s -XPOST {first}/v1/topics/demo/records {auth} {json_type} "
              "-d '{\"records\":[{\"value\":\"hello\",\"partition\":0}]}'",
              f"          curl -s '{last}/v1/topics/demo/partitions/0/records?offset=0' {auth}",
              f"          curl -s {last}/v1/cluster {auth}",
              f"  CLI:    export LOGBROKER_URL={','.join(n.url for n in nodes)} "
              f"LOGBROKER_USER={ADMIN_USER} LOGBROKER_PASSWORD={ADMIN_PASSWORD}; .venv/bin/logbroker topic list",
              "  one node: .venv/bin/logbroker dev-cluster status | stop N | kill N | start N   "
              "(the others keep serving; CLUSTER_DIR names this cluster's work dir when it is not the default)",
              "Ctrl-C stops the nodes, then etcd."]
    return "\n".join(lines)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _answer(request: Request, nodes: NodeSlots, etcd: EtcdProcess, plan: ClusterPlan) -> dict[str, Any]:
    """A control request done (``ControlError`` when it cannot be), with the cluster's state after it."""
    message = ""
    if request.node_id is not None:
        message = nodes.act(request)
        _say(f"{message} (logbroker dev-cluster {request.op} {request.node_id})")
    return {"ok": True, "message": message,
            "cluster": {"work_dir": plan.work_dir, "launcher_pid": os.getpid(),
                        "etcd": {"pid": etcd.pid, "url": plan.etcd_url}, "nodes": nodes.status()}}


def run(plan: ClusterPlan, env: Mapping[str, str]) -> int:
    """Start etcd and the nodes, print the banner, serve control requests and say which node died
    until a signal or etcd's exit, then stop everything started."""
    binary = shutil.which("etcd", path=env.get("PATH"))
    if binary is None:
        raise ClusterError("no etcd on PATH (Debian: apt-get install etcd-server; `make cluster` does it)")
    check_ports_free(plan)
    keys = prepare(plan)
    etcd = EtcdProcess(etcd_args(plan, binary), os.path.join(plan.logs_dir, "etcd.log"), plan.etcd_client_port,
                       plan.etcd_certs)
    nodes = NodeSlots(lambda node_id: node_process(plan, node_id, keys, env),
                      {node_id: plan.http_url(node_id) for node_id in NODE_IDS}, NODE_START_TIMEOUT_S)
    control = ControlServer(plan.work_dir, NODE_IDS)
    code = 0
    with _stop_signals():
        try:
            control.open()
            etcd.start()
            for node_id in NODE_IDS:
                nodes.start(node_id)
            print(banner(plan, nodes.processes(), etcd.pid), flush=True)
            while etcd.proc is not None and etcd.proc.poll() is None:
                for message in nodes.reap():
                    _say(message)
                control.serve_once(lambda request: _answer(request, nodes, etcd, plan), POLL_S)
            _say(f"etcd (pid {etcd.pid}) exited with {etcd.proc.returncode if etcd.proc else None}; see "
                 f"{etcd.log_path}: stopping the cluster")
            code = 1
        except _Stop as stop:
            _say(f"{stop}: stopping the cluster")
        except (ClusterError, ControlError, RuntimeError) as exc:
            _say(f"{exc}\nstopping the cluster")
            code = 1
        finally:
            # A second Ctrl-C does not cut the shutdown short: every step below is bounded.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            control.close()
            nodes.stop_all()
            etcd.stop()
    _say("stopped: " + ", ".join([f"node {n.node_id} (pid {n.pid})" for n in nodes.processes() if n.proc is not None]
                                  + ([f"etcd (pid {etcd.pid})"] if etcd.proc is not None else [])))
    return code


def main() -> int:
    try:
        plan = plan_from_env(os.environ)
        return run(plan, os.environ)
    except (ClusterError, OSError) as exc:
        _say(f"make cluster: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
