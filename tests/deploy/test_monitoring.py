"""The monitoring files (deploy/prometheus, deploy/grafana) stay true to the node: the alert rules
pass ``promtool check rules`` and their unit tests (``promtool test rules``, each alert made to
fire, series beside it that must not), every alert is needed by those tests, the dashboard is a
well-formed Grafana dashboard whose queries Prometheus parses, and every metric a query or a rule
names, and every route it matches, is in the scrape of a real node on a real etcd that has
served produces, fetches, a consumer group and a queue."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.support.auth import ADMIN, ADMIN_PASSWORD, METRICS_TOKEN, bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.promql import exact_matchers, metric_names, substitute

PROMETHEUS = os.path.join(ROOT, "deploy", "prometheus")
ALERTS = os.path.join(PROMETHEUS, "alerts.yml")
ALERTS_TEST = os.path.join(PROMETHEUS, "alerts_test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "logbroker.json")
SEVERITIES = {"critical", "warning"}
# Made by Prometheus itself for every target, not by the node.
SYNTHETIC = {"up"}
# Families whose samples appear only with a fault (a series per failed log, per failing task); the
# node declares them in every scrape.
FAULT_ONLY = {"logbroker_log_offline", "logbroker_background_task_failures_total"}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def promtool(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    assert path, "promtool is not on PATH: install Debian's prometheus package (scripts/ensure-system-deps.sh)"
    return subprocess.run([path, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@functools.cache
def rules() -> list[dict[str, Any]]:
    with open(ALERTS, encoding="utf-8") as f:
        return [rule for group in yaml.safe_load(f)["groups"] for rule in group["rules"]]


@functools.cache
def dashboard() -> dict[str, Any]:
    with open(DASHBOARD, encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def dashboard_queries() -> list[str]:
    queries = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    queries += [v["query"]["query"] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    return queries


def test_the_alert_rules_pass_promtool_check():
    done = promtool("check", "rules", ALERTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_the_alert_rules_pass_their_unit_tests():
    done = promtool("test", "rules", ALERTS_TEST, cwd=PROMETHEUS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_severity_a_summary_and_a_description():
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names)) and all(name.startswith("LogBroker") for name in names)
    for rule in rules():
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]
        assert all(text.strip() for text in rule["annotations"].values()), rule["alert"]
    wanted = {"LogBrokerOfflinePartitions", "LogBrokerUnderReplicatedPartitions", "LogBrokerCoordinatorSessionLost",
              "LogBrokerDiskNearlyFull", "LogBrokerConsumerLagGrowing", "LogBrokerHighErrorRate"}
    assert wanted <= set(names)


@pytest.mark.parametrize("alert", [rule["alert"] for rule in rules()])
def test_the_unit_tests_make_each_alert_fire(alert: str, tmp_path):
    """Without ``alert`` the unit tests fail: some case expects it to fire."""
    with open(ALERTS, encoding="utf-8") as f:
        loaded = yaml.safe_load(f)
    for group in loaded["groups"]:
        group["rules"] = [rule for rule in group["rules"] if rule["alert"] != alert]
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(loaded))
    shutil.copy(ALERTS_TEST, tmp_path / "alerts_test.yml")
    done = promtool("test", "rules", "alerts_test.yml", cwd=str(tmp_path))
    assert done.returncode != 0 and alert in done.stdout + done.stderr, done.stdout


def test_the_dashboard_is_well_formed():
    board = dashboard()
    assert board["uid"] == "logbroker" and board["title"] and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["datasource"] == DATASOURCE
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    taken: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        x, y, w, h = grid["x"], grid["y"], grid["w"], grid["h"]
        assert w > 0 and h > 0 and x >= 0 and x + w <= 24, panel["title"]
        cells = {(column, line) for column in range(x, x + w) for line in range(y, y + h)}
        assert not cells & taken, f"panel {panel['title']!r} overlaps another"
        taken |= cells
        assert panel["title"]
        if panel["type"] == "row":
            assert "targets" not in panel
            continue
        assert panel["type"] in {"timeseries", "stat"} and panel["description"], panel["title"]
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"].strip(), panel["title"]
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for needed in ("bytes in", "records in", "latency", "under-replicated", "offline", "isr", "leader",
                   "lag", "disk", "connections", "etcd session", "by user"):
        assert needed in titles, needed


def test_prometheus_parses_every_query_of_the_dashboard(tmp_path):
    """Each query as a recording rule, through ``promtool check rules`` (Prometheus's own parser)."""
    queries = [substitute(q) for q in dashboard_queries() if not q.startswith("label_values(")]
    recorded = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": q}
                                                           for i, q in enumerate(queries)]}]}
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(recorded))
    done = promtool("check", "rules", str(tmp_path / "queries.yml"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_accepts_the_prometheus_config_of_the_compose_file(tmp_path):
    """``promtool check config`` on prometheus.yml, its container paths turned into the files the
    compose file mounts there (the scrape credential: a stand-in secret)."""
    with open(os.path.join(ROOT, "docker-compose.yml"), encoding="utf-8") as f:
        service = yaml.safe_load(f)["services"]["prometheus"]
    mounts = {target: os.path.join(ROOT, source[2:]) for source, target, *_ in
              (volume.split(":") for volume in service["volumes"]) if source.startswith("./")}
    with open(mounts["/etc/prometheus/prometheus.yml"], encoding="utf-8") as f:
        text = f.read()
    secret = tmp_path / "metrics-token"
    secret.write_text("s" * 48)
    for target, source in mounts.items():
        text = text.replace(target, source)
    text = text.replace("/run/secrets/metrics-token", str(secret))
    (tmp_path / "prometheus.yml").write_text(text)
    done = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_the_metric_names_are_read_from_promql():
    assert metric_names('sum by (le) (rate(a_bucket{route="/v1/{name}", x=~"$instance"}[$__rate_interval]))') \
        == {"a_bucket"}
    assert metric_names("histogram_quantile(0.99, b) / on(instance) group_left(job) c:d2 > bool 1e3 offset 5m") \
        == {"b", "c:d2"}
    assert metric_names("count(up == 0) or vector(0)") == {"up"}
    assert metric_names("label_values(logbroker_leader_partitions, instance)") == {"logbroker_leader_partitions"}
    assert exact_matchers('x{method="POST", route="/v1/t/{name}", a=~"b", c!="d"}') == \
        {("method", "POST"), ("route", "/v1/t/{name}")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("monitored")), size=1) as running:
        yield running


@pytest.fixture(scope="module")
def scrape(cluster: Cluster) -> str:
    """``/metrics`` of a node that has served what the dashboard shows."""
    http = cluster.http(1)
    token = bearer(login(http, ADMIN, ADMIN_PASSWORD))
    http.json("POST", "/v1/topics", expect=201, headers=token, body={"name": "orders", "partitions": 2})
    http.json("POST", "/v1/topics/orders/records", headers=token,
              body={"records": [{"value": str(i), "partition": i % 2} for i in range(10)]})
    http.json("GET", "/v1/topics/orders/partitions/0/records?offset=0", headers=token)
    # The cluster's first group call: it creates the offsets topic and is answered once the group
    # coordinator has loaded it (``routing.while_groups_start``), not refused meanwhile.
    member = http.json("POST", "/v1/groups/billing/members", headers=token,
                       body={"topics": ["orders"], "session_timeout_ms": 30000})
    http.json("POST", "/v1/groups/billing/offsets", headers=token, body={
        "member_id": member["member_id"], "generation": member["generation"],
        "offsets": [{"topic": "orders", "partition": 0, "offset": 1}]})
    http.json("POST", "/v1/topics", expect=201, headers=token, body={"name": "work", "partitions": 1, "kind": "queue"})
    http.json("POST", "/v1/queues/work/messages", headers=token, body={"records": [{"value": "job"}]})

    def scraped() -> str | None:
        reply = http.call("GET", "/metrics", headers=bearer(METRICS_TOKEN))
        text = reply.data.decode()
        return text if reply.status == 200 and "logbroker_group_lag{" in text else None

    found: str = wait_until(scraped)
    return found


def _exported(text: str) -> tuple[set[str], set[str], dict[str, set[tuple[str, str]]]]:
    """Sample names, declared family names, and each sample name's label pairs."""
    samples: dict[str, set[tuple[str, str]]] = {}
    declared = set()
    for family in text_string_to_metric_families(text):
        declared.add(family.name + ("_total" if family.type == "counter" else ""))
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels.items())
    return set(samples), declared, samples


def test_every_metric_the_dashboard_and_the_alerts_name_is_exported(scrape: str):
    sample_names, declared, labels = _exported(scrape)
    queries = {"dashboard": dashboard_queries(), "alerts": [rule["expr"] for rule in rules()]}
    missing = []
    for source, exprs in queries.items():
        for expr in exprs:
            names = metric_names(expr)
            assert names, expr
            for name in names - SYNTHETIC:
                if name in sample_names or (name in FAULT_ONLY and name in declared):
                    continue
                missing.append(f"{source}: {name} (in {expr})")
    assert not missing, "\n".join(missing)
    routes = {value for label, value in labels["logbroker_http_requests_total"] if label == "route"}
    for expr in queries["dashboard"] + queries["alerts"]:
        for label, value in exact_matchers(expr):
            if label == "route":
                assert value in routes, f"no requests on route {value!r} in the scrape"
    assert declared >= FAULT_ONLY


def test_the_scrape_has_the_histogram_series_the_latency_panels_read(scrape: str):
    sample_names, _, _ = _exported(scrape)
    base = "logbroker_http_request_duration_seconds"
    assert {f"{base}_bucket", f"{base}_sum", f"{base}_count"} <= sample_names
