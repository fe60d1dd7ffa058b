"""The Dockerfile, the compose files and nginx's config stay in step with the code (no Docker
engine runs here, so they are checked by reading): every package is copied, every LOGBROKER_*
variable they set is a real setting, the ports they publish are the ones the node listens on, and
the cluster's compose file is a cluster: etcd, three nodes that each resolve to a valid config
pointing at it, nginx balancing over the three, and Prometheus scraping each of them (on its real
HTTP port, with the credential the nodes take) with Grafana showing the dashboard."""

from __future__ import annotations

import glob
import os
import re
import subprocess
from typing import Any

import yaml

from logbroker.config import ENV_PREFIX, NodeConfig, field_names, resolve
from logbroker.proxies import TrustedProxies
from logbroker.rpc_service import rpc_security
from tests.conftest import ROOT
from tests.support.distribution import SERVER_EXTRA, shipped_packages
from tests.test_layering import PACKAGES

SETTINGS = {ENV_PREFIX + name.upper() for name in field_names()}
NODES = ("node1", "node2", "node3")
MONITORING = ("prometheus", "grafana")
REQUIRED = re.compile(r"^\$\{(\w+):\?[^}]+\}$")


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def _compose(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load(_read(name))
    assert isinstance(loaded, dict)
    return loaded


def test_dockerfile_copies_every_package_and_sets_real_settings():
    """The image is a node: every package the distribution ships, installed with the server extra,
    and nothing of the benchmarks, the chaos harness or the tests."""
    dockerfile = _read("Dockerfile")
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.MULTILINE))
    assert copied == set(shipped_packages()) and copied < set(PACKAGES)
    assert not re.search(r"^COPY (\. |.*\b(benchmarks|chaos|tests)\b)", dockerfile, re.MULTILINE)
    installs = re.findall(r"pip install --no-cache-dir (\S+)", dockerfile)
    assert installs[-1] == f'".[{SERVER_EXTRA}]"', installs
    settings = set(re.findall(r"(LOGBROKER_[A-Z_]+)=", dockerfile))
    assert settings and settings <= SETTINGS
    assert 'ENTRYPOINT ["logbroker", "serve"]' in dockerfile and "EXPOSE 8080 9090" in dockerfile
    assert "LOGBROKER_HTTP_PORT=8080" in dockerfile and "LOGBROKER_RPC_PORT=9090" in dockerfile
    assert re.search(r"HEALTHCHECK .*\n.*127\.0\.0\.1:8080/readyz", dockerfile)


def test_single_node_compose_file_is_valid_and_uses_real_settings():
    compose = _compose("docker-compose.single.yml")
    service = compose["services"]["logbroker"]
    assert service["build"] == "."
    assert set(service["environment"]) <= SETTINGS
    assert service["environment"]["LOGBROKER_AUTH"] == "on"
    assert service["environment"]["LOGBROKER_COORDINATOR"] == "local"
    assert any(port.endswith(":8080") for port in service["ports"])
    assert any(port.endswith(":9092") for port in service["ports"])  # gRPC (the image's LOGBROKER_GRPC_PORT)
    assert any(port.endswith(":9093") for port in service["ports"])  # Kafka (the image's LOGBROKER_KAFKA_PORT)
    volume = service["volumes"][0].split(":")[0]
    assert volume in compose["volumes"]


def _node_config(environment: dict[str, str]) -> NodeConfig:
    """What a node of the compose file resolves to, each required secret given a value."""
    env = {}
    for name, value in environment.items():
        required = REQUIRED.match(value)
        env[name] = "s" * 48 if required else value
        assert not required or required.group(1) == name, f"{name} takes its value from another variable"
    return resolve({}, {**env, "LOGBROKER_HTTP_HOST": "0.0.0.0"}, None)


def test_cluster_compose_file_has_etcd_three_nodes_and_nginx():
    compose = _compose("docker-compose.yml")
    services = compose["services"]
    assert set(services) == {"etcd", *NODES, "nginx", *MONITORING}
    etcd = services["etcd"]["command"]
    assert services["etcd"]["image"].startswith("quay.io/coreos/etcd:v3.5.")
    # etcd serves TLS only and lets in only clients with a certificate of its CA (decision 0226).
    assert "--listen-client-urls=https://0.0.0.0:2379" in etcd and "--advertise-client-urls=https://etcd:2379" in etcd
    assert not [a for a in etcd if "client-urls=http:" in a]
    assert {"--client-cert-auth", "--trusted-ca-file=/certs/etcd-ca.pem", "--cert-file=/certs/etcd-server.pem",
            "--key-file=/certs/etcd-server.key"} <= set(etcd)
    assert "./deploy/certs:/certs:ro" in services["etcd"]["volumes"]
    health = services["etcd"]["healthcheck"]["test"]
    assert "--endpoints=https://127.0.0.1:2379" in health and "--cert=/certs/etcd-client.pem" in health
    assert any(v.endswith(":/etcd-data") for v in services["etcd"]["volumes"]) and "--data-dir=/etcd-data" in etcd
    configs = {}
    kafka_ports: set[int] = set()
    for name in NODES:
        service = services[name]
        environment = service["environment"]
        assert service["build"] == "." and set(environment) <= SETTINGS
        assert service["depends_on"]["etcd"]["condition"] == "service_healthy"
        config = _node_config(environment)
        assert config.coordinator == "etcds://etcd:2379" and config.auth == "on"
        assert (config.etcd_ca_file, config.etcd_cert_file, config.etcd_key_file) == \
            ("/certs/etcd-ca.pem", "/certs/etcd-client.pem", "/certs/etcd-client.key")
        assert config.advertised_host == name
        assert rpc_security(config)[0], "the node would not serve the internal RPC"
        assert config.rpc_tls_cert_file == f"/certs/node-{config.node_id}.pem"
        for secret in ("LOGBROKER_ADMIN_PASSWORD", "LOGBROKER_JWT_SECRET", "LOGBROKER_CLUSTER_TOKEN",
                       "LOGBROKER_METRICS_TOKEN"):
            assert REQUIRED.match(environment[secret]), f"{name}: {secret} is not a required variable"
        data = [v.split(":")[0] for v in service["volumes"] if v.endswith(":/data")]
        assert len(data) == 1 and data[0] in compose["volumes"]
        assert "./deploy/certs:/certs:ro" in service["volumes"]
        configs[name] = (config.node_id, data[0])
        # Kafka clients on the host reach every node at the address its Metadata advertises.
        assert config.kafka_port == 9093 and config.kafka_advertised_host == "127.0.0.1"
        assert service["ports"] == [f"127.0.0.1:{config.kafka_advertised_port}:{config.kafka_port}"]
        kafka_ports.add(config.kafka_advertised_port)
    assert kafka_ports == {9097, 9098, 9099}  # the ports `make cluster` uses too
    assert sorted(node_id for node_id, _ in configs.values()) == [1, 2, 3]
    assert len({volume for _, volume in configs.values()}) == 3
    nginx = services["nginx"]
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    assert set(nginx["depends_on"]) == set(NODES)
    assert any(port.endswith(":8080") for port in nginx["ports"])
    nginx_address = nginx["networks"]["default"]["ipv4_address"]
    for name in NODES:  # nginx's clients are not one client to the nodes (decision 0235)
        assert TrustedProxies.parse(_node_config(services[name]["environment"]).trusted_proxies).trusts(nginx_address)
    assert any(port.endswith(":9092") for port in nginx["ports"])


def test_nginx_balances_least_conn_over_the_three_nodes_without_buffering():
    conf = re.sub(r"#.*", "", _read("deploy/nginx.conf"))
    upstream = re.search(r"upstream (\w+) \{([^}]*)\}", conf)
    assert upstream is not None
    assert re.search(r"^\s*least_conn;", upstream.group(2), re.MULTILINE)
    servers = re.findall(r"^\s*server (\S+?)[ ;]", upstream.group(2), re.MULTILINE)
    assert servers == [f"{name}:8080" for name in NODES]
    assert f"proxy_pass http://{upstream.group(1)};" in conf
    assert re.search(r"proxy_buffering off;", conf)
    read_timeout = re.search(r"proxy_read_timeout (\d+)s;", conf)
    assert read_timeout is not None and int(read_timeout.group(1)) * 1000 > NodeConfig().fetch_wait_ms_max
    assert "non_idempotent" not in conf  # a produce that reached a node is never sent to another


def test_nginx_passes_grpc_on_to_the_nodes_grpc_ports():
    conf = re.sub(r"#.*", "", _read("deploy/nginx.conf"))
    upstream = re.search(r"upstream (\w+) \{([^}]*:9092[^}]*)\}", conf)
    assert upstream is not None
    servers = re.findall(r"^\s*server (\S+?)[ ;]", upstream.group(2), re.MULTILINE)
    assert servers == [f"{name}:9092" for name in NODES]
    assert f"grpc_pass grpc://{upstream.group(1)};" in conf
    grpc_server = conf[conf.index("listen 9092;"):conf.index(f"grpc_pass grpc://{upstream.group(1)};")]
    assert "http2 on;" in grpc_server
    read_timeout = re.search(r"grpc_read_timeout (\d+)s;", conf)
    assert read_timeout is not None and int(read_timeout.group(1)) >= 600  # idle Subscribe streams stay open
    dockerfile = _read("Dockerfile")
    assert "LOGBROKER_GRPC_PORT=9092" in dockerfile and re.search(r"EXPOSE .*\b9092\b", dockerfile)


def test_the_consoles_files_are_package_data_so_the_image_serves_them():
    """``pip install .`` (the image's install) copies only what setup.cfg names besides modules."""
    import configparser
    import fnmatch

    setup = configparser.ConfigParser()
    setup.read(os.path.join(ROOT, "setup.cfg"))
    patterns = setup["options.package_data"]["http_api"].split()
    folder = os.path.join(ROOT, "http_api", "console_static")
    shipped = os.listdir(folder)
    assert "index.html" in shipped and "app.js" in shipped
    for name in shipped:
        assert any(fnmatch.fnmatch(f"console_static/{name}", p) for p in patterns), name


def test_make_run_gives_the_admin_password_through_the_environment_not_the_command_line(tmp_path):
    """``make run`` with a stand-in for Python that reports its arguments and environment: the
    node's command line names no password (every local user reads ``/proc/<pid>/cmdline``)."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "ARGS $*"\necho "ENV $LOGBROKER_ADMIN_PASSWORD"\n')
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".installed-server"
    stamp.touch()
    done = subprocess.run(["make", "--no-print-directory", "-o", str(stamp), "run", f"VENV={venv}", f"PY={fake}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    args = [line for line in done.stdout.splitlines() if line.startswith("ARGS ")]
    assert len(args) == 1 and "logbroker serve" in args[0] and "--admin-user admin" in args[0]
    assert "password" not in args[0]
    assert "ENV dev-admin-password" in done.stdout.splitlines()


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's bind mounts of the repository's files: the path inside the container -> the
    file or folder in the checkout (each must exist)."""
    out = {}
    for volume in service["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            path = os.path.join(ROOT, source[2:])
            assert os.path.exists(path), f"{source} is mounted and not in the repository"
            out[target] = path
    return out


def _image_env(name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", _read("Dockerfile"))
    assert found is not None, name
    return found.group(1)


def test_prometheus_scrapes_every_node_on_its_metrics_port_with_the_nodes_credential():
    compose = _compose("docker-compose.yml")
    services = compose["services"]
    nodes = sorted(name for name, service in services.items() if service.get("build") == ".")
    assert nodes == list(NODES)
    prometheus = services["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:v2.")
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    mounts = _mounts(prometheus)
    with open(mounts["/etc/prometheus/prometheus.yml"], encoding="utf-8") as f:
        config = yaml.safe_load(f)
    for rule_file in config["rule_files"]:
        assert rule_file in mounts, f"{rule_file} is not mounted"
    assert os.path.samefile(mounts["/etc/prometheus/alerts.yml"], os.path.join(ROOT, "deploy/prometheus/alerts.yml"))
    assert set(prometheus["depends_on"]) == set(nodes)
    assert all(port.startswith("127.0.0.1:") for port in prometheus["ports"])
    assert any(v.endswith(":/prometheus") and v.split(":")[0] in compose["volumes"] for v in prometheus["volumes"])
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["logbroker"]
    assert job.get("metrics_path", "/metrics") == "/metrics" and job.get("scheme", "http") == "http"
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    http_port = int(_image_env("LOGBROKER_HTTP_PORT"))
    expected = []
    for name in nodes:
        environment = services[name]["environment"]
        config_of_node = resolve({}, {"LOGBROKER_HTTP_PORT": str(http_port), **{
            k: "s" * 48 if REQUIRED.match(v) else v for k, v in environment.items()}}, None)
        assert config_of_node.http_port == http_port and not config_of_node.tls_cert_file  # plain HTTP
        assert config_of_node.metrics_token and config_of_node.metrics_public != "true"
        expected.append(f"{name}:{http_port}")
    assert sorted(targets) == expected
    # The scrape credential: the nodes' LOGBROKER_METRICS_TOKEN, as a secret file Prometheus reads.
    assert job["authorization"]["type"] == "Bearer"
    secret_file = job["authorization"]["credentials_file"]
    assert secret_file.startswith("/run/secrets/")
    secret = secret_file.removeprefix("/run/secrets/")
    assert secret in prometheus["secrets"]
    assert compose["secrets"][secret] == {"environment": "LOGBROKER_METRICS_TOKEN"}


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard():
    compose = _compose("docker-compose.yml")
    grafana = compose["services"]["grafana"]
    assert grafana["image"].startswith("grafana/grafana:")
    assert grafana["depends_on"] == ["prometheus"]
    assert all(port.startswith("127.0.0.1:") and port.endswith(":3000") for port in grafana["ports"])
    assert REQUIRED.match(grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"])
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    mounts = _mounts(grafana)
    provisioning = mounts["/etc/grafana/provisioning"]
    with open(os.path.join(provisioning, "datasources", "prometheus.yml"), encoding="utf-8") as f:
        sources = yaml.safe_load(f)["datasources"]
    assert [(s["type"], s["url"], s["isDefault"]) for s in sources] == [("prometheus", "http://prometheus:9090", True)]
    assert "--web.listen-address" not in " ".join(compose["services"]["prometheus"]["command"])  # :9090 it is
    with open(os.path.join(provisioning, "dashboards", "logbroker.yml"), encoding="utf-8") as f:
        providers = yaml.safe_load(f)["providers"]
    folders = [p["options"]["path"] for p in providers]
    dashboards = {target: path for target, path in mounts.items() if target.endswith(".json")}
    assert dashboards and all(os.path.dirname(target) in folders for target in dashboards)
    assert os.path.samefile(next(iter(dashboards.values())), os.path.join(ROOT, "deploy/grafana/logbroker.json"))
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] in dashboards


def test_every_documented_compose_up_of_the_cluster_exports_every_variable_it_requires():
    """``docker compose up`` stops on a required variable left unset: each shell block of the
    README and docs/ that starts the cluster, and the compose file's own header, set each one
    (``secrets: environment:`` are read from the environment too)."""
    text = _read("docker-compose.yml")
    required = set(re.findall(r"\$\{(\w+):\?", text))
    required |= {s["environment"] for s in _compose("docker-compose.yml")["secrets"].values()}
    assert required <= set(re.findall(r"^#\s+export (\w+)=", text, re.MULTILINE))
    documents = ["README.md", *(os.path.relpath(p, ROOT) for p in
                                glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))]
    starts = 0
    for document in documents:
        for block in re.findall(r"^```sh\n(.*?)^```", _read(document), re.MULTILINE | re.DOTALL):
            if re.search(r"^docker compose up(?! *-f)", block, re.MULTILINE):
                starts += 1
                missing = required - set(re.findall(r"^export (\w+)=", block, re.MULTILINE))
                assert not missing, f"{document}: a block starting the cluster leaves {sorted(missing)} unset"
    assert starts >= 1
