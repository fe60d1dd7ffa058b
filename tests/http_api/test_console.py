"""The web console and the API explorer, in a real Chromium (Debian's, driven by Playwright)
against a real node: log in, create a topic, produce, browse, a live tail, a group's lag, a user
refused what they may not read, record values that are markup shown as text and never run, the
cluster page's counts and coordinator, /docs in sections calling the node with a token, and a
browser sent from / to the console. Screenshots go to ``test-artifacts/console/``."""

from __future__ import annotations

import datetime
import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, METRICS_TOKEN, bearer, login
from tests.support.cluster import Cluster, running_cluster
from tests.support.nodes import NodeProcess

ARTIFACTS = os.path.join(ROOT, "test-artifacts", "console")
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("console-node")), *AUTH_ARGS, "--kafka-port", "0") as process:
        yield process


@pytest.fixture(scope="module")
def http(node) -> Http:
    return Http(node.url)


@pytest.fixture(scope="module")
def admin(http) -> dict[str, str]:
    return bearer(login(http, ADMIN, ADMIN_PASSWORD))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        pytest.fail("Chromium is not installed: `make test` installs it (scripts/ensure-system-deps.sh)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture()
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860}, timezone_id="UTC")
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page raised: {errors}"


def shot(page: Any, name: str) -> None:
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


def log_in(page: Any, url: str, user: str, password: str) -> None:
    page.goto(f"{url}/console")
    page.fill("#login input[name=username]", user)
    page.fill("#login input[name=password]", password)
    page.click("#login button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")


# ---- without a browser ----------------------------------------------------------------------

def test_console_pages_are_public_with_a_strict_policy_and_the_data_is_not(http):
    for path, kind in (("/console", "text/html"), ("/console/app.js", "text/javascript"),
                       ("/console/console.css", "text/css"), ("/docs", "text/html"),
                       ("/docs/swagger-ui-bundle.js", "text/javascript"), ("/docs/init.js", "text/javascript")):
        status, headers, _ = http.call("GET", path)
        assert status == 200 and headers["content-type"].startswith(kind), path
        assert headers["x-content-type-options"] == "nosniff"
        policy = headers["content-security-policy"]
        assert "script-src 'self';" in policy and "unsafe-eval" not in policy and "default-src 'none'" in policy
        assert "frame-ancestors 'none'" in policy
        if path.startswith("/console"):
            assert "unsafe-inline" not in policy
    for path in ("/console/nope.js", "/console/..%2Fconsole.py", "/console/%2e%2e%2f%2e%2e%2fsetup.cfg",
                 "/docs/index.j2", "/docs/..%2F..%2F__init__.py"):
        assert http.call("GET", path)[0] == 404, path
    assert http.call("GET", "/v1/topics")[0] == 401
    paths = http.json("GET", "/v1/openapi.json")["paths"]
    assert "/v1/topics" in paths and not any(p.startswith(("/console", "/docs")) for p in paths)


def test_the_root_sends_a_browser_to_the_console_and_tells_a_client_where_things_are(http):
    sent = http.call("GET", "/", headers={"Accept": BROWSER_ACCEPT})
    assert sent.status == 302 and sent.headers["location"] == "/console"
    assert sent.headers["vary"] == "Accept"
    for accept in (None, "*/*", "application/json", "application/json, text/html;q=0.5"):
        reply = http.call("GET", "/", headers={"Accept": accept} if accept else {})
        assert reply.status == 200 and reply.headers["content-type"].startswith("application/json"), accept
        assert reply.headers["vary"] == "Accept"
        index = reply.json()
        assert index["api"] == "/v1" and index["console"] == "/console" and index["docs"] == "/docs"
        assert index["openapi"] == "/v1/openapi.json"
    for path in (index["console"], index["docs"], index["openapi"], index["health"], index["ready"]):
        assert http.call("GET", path).status == 200, path


def test_the_favicon_is_served_without_a_token_and_both_pages_link_it(http):
    icon = http.call("GET", "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/vnd.microsoft.icon"
    assert icon.data[:4] == b"\0\0\1\0", "an ICO file"
    assert icon.headers["x-content-type-options"] == "nosniff"
    for page in ("/console", "/docs"):
        html = http.call("GET", page).data.decode()
        assert '<link rel="icon" type="image/svg+xml" href="/console/favicon.svg">' in html, page
    linked = http.call("GET", "/console/favicon.svg")
    assert linked.status == 200 and linked.headers["content-type"] == "image/svg+xml"
    assert linked.data.startswith(b"<svg ")


def listed(http: Http, who: dict[str, str], internal: bool) -> list[dict[str, Any]]:
    return http.json("GET", f"/v1/topics?internal={str(internal).lower()}", headers=who)["topics"]


def test_cluster_counts_only_what_the_caller_may_see(http, admin):
    http.json("POST", "/v1/users", 201, body={"username": "console-ivy", "password": "ivy-password"}, headers=admin)
    ivy = bearer(login(http, "console-ivy", "ivy-password"))
    http.json("POST", "/v1/topics", 201, body={"name": "console.hidden", "partitions": 5}, headers=admin)
    http.json("POST", "/v1/topics", 201, body={"name": "console.shared", "partitions": 2}, headers=admin)
    http.json("PUT", "/v1/topics/console.shared/acl", body={"user": "console-ivy", "permissions": ["read"]},
              headers=admin)
    http.json("POST", "/v1/topics", 201, body={"name": "console.ivy", "partitions": 3}, headers=ivy)
    http.json("POST", "/v1/topics", 201, body={"name": "console.ivy-jobs", "partitions": 2, "kind": "queue"},
              headers=ivy)
    http.json("POST", "/v1/groups/console.ivy-readers/members", body={"topics": ["console.ivy"]}, headers=ivy)
    seen = listed(http, ivy, internal=False)
    assert {t["name"] for t in seen} >= {"console.shared", "console.ivy", "console.ivy-jobs"}
    assert "console.hidden" not in {t["name"] for t in seen}
    view = http.json("GET", "/v1/cluster", headers=ivy)
    assert view["counts"] == {"topics": len(seen), "partitions": sum(t["partitions"] for t in seen),
                              "internal_topics": 0, "internal_partitions": 0}
    assert {t["name"] for t in view["topics"]} == {t["name"] for t in seen}
    assert listed(http, ivy, internal=True) == seen, "no internal topic is the user's to see"
    everything = listed(http, admin, internal=True)
    internal = [t for t in everything if t["name"].startswith("__")]
    assert {t["name"] for t in internal} >= {"__consumer_offsets"}
    view = http.json("GET", "/v1/cluster", headers=admin)
    users = listed(http, admin, internal=False)
    assert view["counts"] == {"topics": len(users), "partitions": sum(t["partitions"] for t in users),
                              "internal_topics": len(internal),
                              "internal_partitions": sum(t["partitions"] for t in internal)}
    assert sum(len(t["partitions"]) for t in view["topics"]) == sum(t["partitions"] for t in everything)


def test_the_coordinator_is_reported_as_it_is(http, admin):
    """A single node coordinates itself (no etcd): no etcd session is claimed, to anyone."""
    assert http.json("GET", "/v1/cluster", headers=admin)["coordinator"] == "local"
    for operator in (admin, bearer(METRICS_TOKEN)):
        assert http.json("GET", "/readyz", headers=operator)["coordinator"] == {"kind": "local"}


def test_no_markup_from_data_reaches_innerHTML():
    """The console's scripts build every node through textContent: none assigns HTML."""
    folder = os.path.join(ROOT, "http_api", "console_static")
    for name in os.listdir(folder):
        if name.endswith(".js"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text = f.read()
            for risky in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
                assert risky not in text, f"{name} uses {risky}"


# ---- in the browser ---------------------------------------------------------------------------

def test_admin_logs_in_creates_a_topic_produces_and_browses(node, page, http, admin):
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.wait_for_selector("text=Nodes alive")
    page.wait_for_selector("td:has-text('alive')")
    shot(page, "cluster")
    page.click("#nav a[href='#/topics']")
    page.fill("#create-topic input[name=name]", "console.orders")
    page.fill("#create-topic input[name=partitions]", "3")
    page.click("#create-topic button[type=submit]")
    page.wait_for_selector("h1:has-text('Topic console.orders')")
    assert http.json("GET", "/v1/topics/console.orders", headers=admin)["partition_count"] == 3
    page.fill("#produce input[name=key]", "order-1")
    page.fill("#produce textarea[name=value]", '{"item": "book", "qty": 2}')
    page.select_option("#produce select[name=partition]", "1")
    page.click("#produce button[type=submit]")
    page.wait_for_selector("#produce-result:has-text('partition 1, offset 0')")
    page.wait_for_function("() => [...document.querySelectorAll('td')].some(td => td.textContent === '1')")
    shot(page, "topic")
    page.click("a[href='#/browse/console.orders/1']")
    value = page.wait_for_selector("#records tr[data-offset='0'] pre.value")
    assert value.text_content() == '{\n  "item": "book",\n  "qty": 2\n}'
    assert page.text_content("#records tr[data-offset='0'] pre.key") == "order-1"
    page.select_option("select[name=format]", "hex")
    assert page.text_content("#records tr[data-offset='0'] pre.value").startswith("7b 22 69 74 65 6d 22")
    page.select_option("select[name=format]", "auto")
    shot(page, "browser")
    page.goto(f"{node.url}/console#/topics")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("button[data-delete='console.orders']")
    page.wait_for_function("() => !document.querySelector(\"button[data-delete='console.orders']\")")
    assert http.call("GET", "/v1/topics/console.orders", headers=admin)[0] == 404


def test_record_values_that_are_markup_render_as_text_and_run_nothing(node, page, http, admin):
    http.json("POST", "/v1/topics", 201, body={"name": "console.xss", "partitions": 1}, headers=admin)
    values = ["<script>window.__pwned = 1</script>", "<img src=x onerror=\"window.__pwned = 2\">",
              "\"><svg onload=\"window.__pwned = 3\">"]
    http.json("POST", "/v1/topics/console.xss/records",
              body={"records": [{"value": v, "key": v, "headers": [{"name": "h", "value": v}]} for v in values]},
              headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/browse/console.xss/0")
    page.wait_for_selector("#records tr[data-offset='2']")
    shown = [page.text_content(f"#records tr[data-offset='{i}'] pre.value") for i in range(3)]
    assert shown == values
    assert page.evaluate("() => window.__pwned") is None
    assert page.evaluate("() => document.querySelectorAll('#records img, #records script, #records svg').length") == 0


def test_live_tail_shows_records_as_they_arrive(node, page, http, admin):
    http.json("POST", "/v1/topics", 201, body={"name": "console.live", "partitions": 1}, headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/browse/console.live/0")
    page.wait_for_selector("#browse-status:has-text('no records here')")
    page.click("#tail")
    page.wait_for_selector("#tail:has-text('Stop tail')")
    page.wait_for_timeout(500)  # the stream is open before the records are written
    for n in range(3):
        http.json("POST", "/v1/topics/console.live/records", body={"records": [{"value": f"live-{n}"}]},
                  headers=admin)
    page.wait_for_selector("#records tr[data-offset='2']")
    assert [page.text_content(f"#records tr[data-offset='{n}'] pre.value") for n in range(3)] == \
        ["live-0", "live-1", "live-2"]
    page.click("#tail")
    page.wait_for_selector("#tail:has-text('Live tail')")


def test_a_groups_lag_is_shown(node, page, http, admin):
    http.json("POST", "/v1/topics", 201, body={"name": "console.lag", "partitions": 1}, headers=admin)
    http.json("POST", "/v1/topics/console.lag/records", body={"records": [{"value": str(n)} for n in range(7)]},
              headers=admin)
    joined = http.json("POST", "/v1/groups/console.readers/members", body={"topics": ["console.lag"]}, headers=admin)
    http.json("POST", "/v1/groups/console.readers/offsets", headers=admin, body={
        "member_id": joined["member_id"], "generation": joined["generation"],
        "offsets": [{"topic": "console.lag", "partition": 0, "offset": 2}]})
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/groups")
    page.click("a[href='#/groups/console.readers']")
    page.wait_for_selector("h2:has-text('Offsets and lag')")
    row = page.wait_for_selector("#group-offsets tr:has(td:text-is('console.lag'))")
    cells = [c.text_content() for c in row.query_selector_all("td")]
    assert cells[3:] == ["2", "7", "5"]
    page.wait_for_function("() => document.querySelector('.chart .value').textContent === '5.0'")
    shot(page, "group")


def test_a_kafka_clients_group_is_shown_with_its_members(node, page, http, admin):
    """A consumer group of librdkafka's (the Kafka listener's own protocol) is listed and described
    as the broker's own groups are: its member, the partition it was given, its offsets."""
    from confluent_kafka import Consumer, TopicPartition

    http.json("POST", "/v1/topics", 201, body={"name": "console.kafka", "partitions": 1}, headers=admin)
    http.json("POST", "/v1/topics/console.kafka/records", body={"records": [{"value": "k"}] * 4}, headers=admin)
    consumer = Consumer({"bootstrap.servers": node.kafka_address, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "PLAIN", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD,
                         "group.id": "console.kafka-readers", "client.id": "console-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["console.kafka"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("console.kafka", 0, 1)], asynchronous=False)
        log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
        page.goto(f"{node.url}/console#/groups")
        page.click("a[href='#/groups/console.kafka-readers']")
        row = page.wait_for_selector("tr:has(td:text-is('console.kafka: 0'))")
        cells = [c.text_content() for c in row.query_selector_all("td")]
        assert cells[1:4] == [ADMIN, "console.kafka", "console.kafka: 0"]
        offsets = page.wait_for_selector("#group-offsets tr:has(td:text-is('console.kafka'))")
        assert [c.text_content() for c in offsets.query_selector_all("td")][2:] == [cells[0], "1", "4", "3"]
    finally:
        consumer.close()


def test_usage_is_shown_per_user_and_topic(node, page, http, admin):
    http.json("POST", "/v1/topics", 201, body={"name": "console.used", "partitions": 1}, headers=admin)
    http.json("POST", "/v1/topics/console.used/records", body={"records": [{"value": "u"}] * 3}, headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.click("#nav a[href='#/usage']")
    row = page.wait_for_selector("#usage-rows tr:has(td:text-is('console.used'))")
    cells = [c.text_content() for c in row.query_selector_all("td")]
    assert cells[1:3] == [ADMIN, "console.used"] and cells[4] == "3"
    page.select_option("#usage-by", "day")
    page.wait_for_selector("#usage-rows tr:has(td:text-is('console.used'))")
    shot(page, "usage")


def test_a_compacted_topics_partitions_show_their_dirty_ratio_and_last_compaction(node, page, http, admin):
    for name, config in (("console.state", {"cleanup_policy": "compact"}), ("console.plain", {})):
        http.json("POST", "/v1/topics", 201, body={"name": name, "partitions": 1, "config": config}, headers=admin)
        http.json("POST", f"/v1/topics/{name}/records", body={"records": [{"key": "k", "value": "v"}]}, headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/topics/console.state")
    page.wait_for_selector("th:text-is('Dirty')")
    row = page.wait_for_selector("tr:has(td:text-is('not yet'))")
    headers = row.evaluate("r => [...r.closest('table').querySelectorAll('th')].map(h => h.textContent)")
    cells = dict(zip(headers, [c.text_content() for c in row.query_selector_all("td")], strict=True))
    assert cells["Dirty"] == "0%" and cells["Last compaction"] == "not yet", cells
    shot(page, "compacted-topic")
    page.goto(f"{node.url}/console#/topics/console.plain")
    page.wait_for_selector("h1:has-text('Topic console.plain')")
    page.wait_for_selector("td:text-is('Browse'), a:text-is('Browse')")
    assert "Dirty" not in [h.text_content() for h in page.query_selector_all("th")]


def test_a_user_is_refused_the_topics_they_may_not_read(node, page, http, admin):
    http.json("POST", "/v1/users", 201, body={"username": "console-bob", "password": "bob-password"},
              headers=admin)
    http.json("POST", "/v1/topics", 201, body={"name": "console.secret", "partitions": 1}, headers=admin)
    http.json("POST", "/v1/topics/console.secret/records", body={"records": [{"value": "classified"}]}, headers=admin)
    log_in(page, node.url, "console-bob", "bob-password")
    assert page.is_hidden("#nav-users")
    page.goto(f"{node.url}/console#/topics")
    page.wait_for_selector("h1:has-text('Topics & queues')")
    assert page.query_selector("a[href='#/topics/console.secret']") is None
    page.goto(f"{node.url}/console#/browse/console.secret/0")
    page.wait_for_selector("h1:has-text('Cannot show this page')")
    assert "classified" not in page.content()


def test_docs_explores_the_api_and_tries_it_out_with_a_token(node, page, http):
    token = login(http, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/docs")
    page.wait_for_selector("text=LogBroker HTTP API")
    page.click("button.authorize")
    page.fill(".auth-container input", token)
    page.click(".auth-container button.authorize")
    page.click("button.close-modal")
    page.locator(".opblock-tag-section > h3").first.wait_for()
    sections = page.evaluate("() => [...document.querySelectorAll('.opblock-tag-section > h3')].map(h => h.id)")
    assert sections == [f"operations-tag-{name}" for name in
                        ("auth", "topics", "records", "groups", "queues", "users", "usage", "cluster", "service")]
    block = page.locator("#operations-topics-list_topics")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.text_content().strip().startswith("200")
    body = block.locator(".live-responses-table tbody .response-col_description pre").first.text_content()
    assert '"topics"' in body
    shot(page, "docs")


def test_a_queues_state_users_and_grants_and_a_browse_by_time(node, page, http, admin):
    http.json("POST", "/v1/topics", 201, body={"name": "console.jobs", "partitions": 1, "kind": "queue"},
              headers=admin)
    http.json("POST", "/v1/queues/console.jobs/messages", body={"records": [{"value": f"job-{n}"} for n in range(3)]},
              headers=admin)
    received = http.json("POST", "/v1/queues/console.jobs/receive", body={"max_messages": 1}, headers=admin)
    assert len(received["messages"]) == 1
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/topics/console.jobs")
    page.wait_for_selector("text=Ready 2 · in flight 1 · dead-lettered 0")
    page.goto(f"{node.url}/console#/users")
    page.fill("#create-user input[name=username]", "console-carol")
    page.fill("#create-user input[name=password]", "carol-password")
    page.click("#create-user button[type=submit]")
    page.wait_for_selector("td:text-is('console-carol')")
    assert any(u["name"] == "console-carol" for u in http.json("GET", "/v1/users", headers=admin)["users"])
    page.goto(f"{node.url}/console#/topics/console.jobs")
    page.fill("#grant input[name=user]", "console-carol")
    page.click("#grant button[type=submit]")
    page.wait_for_selector("td:text-is('console-carol')")
    acl = http.json("GET", "/v1/topics/console.jobs/acl", headers=admin)["acl"]
    assert [(g["user"], g["permissions"]) for g in acl] == [("console-carol", ["read"])]
    http.json("POST", "/v1/topics", 201, body={"name": "console.timed", "partitions": 1}, headers=admin)
    now_ms = int(time.time() * 1000)
    for value, timestamp in (("old", now_ms - 3_600_000), ("new", now_ms)):
        http.json("POST", "/v1/topics/console.timed/records", headers=admin,
                  body={"records": [{"value": value, "timestamp": timestamp}]})
    page.goto(f"{node.url}/console#/browse/console.timed/0")
    page.wait_for_selector("#records tr[data-offset='1']")
    between = datetime.datetime.fromtimestamp(now_ms / 1000 - 1800, datetime.UTC).strftime("%Y-%m-%dT%H:%M")
    page.fill("#browse input[name=timestamp]", between)  # the page's time zone is UTC (the context's)
    page.click("#browse button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#records tr').length === 1")
    assert page.text_content("#records tr pre.value") == "new"


def fmt_bytes(n: int) -> str:
    """The console's ``fmtBytes``."""
    units, i, value = ["B", "KiB", "MiB", "GiB", "TiB"], 0, float(n)
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{value:.1f} {units[i]}" if i else f"{n} {units[0]}"


def test_storage_used_and_limits_are_shown_and_an_admin_sets_a_limit(node, page, http, admin):
    mib = 1024 * 1024
    http.json("POST", "/v1/users", 201, headers=admin, body={
        "username": "console-dora", "password": "dora-password",
        "quotas": {"storage_bytes_max": 3 * mib, "produce_bytes_per_s": 10 * mib}})
    dora = bearer(login(http, "console-dora", "dora-password"))
    http.json("POST", "/v1/topics", 201, body={"name": "console.dora", "partitions": 1}, headers=dora)
    http.json("POST", "/v1/topics/console.dora/records", body={"records": [{"value": "d" * 3000}]}, headers=dora)
    used = http.json("GET", "/v1/users/console-dora", headers=dora)["storage"]["used_bytes"]
    assert used > 3000
    log_in(page, node.url, "console-dora", "dora-password")
    page.wait_for_function("(text) => document.querySelector('#who-storage').textContent === text",
                           arg=f"stores {fmt_bytes(used)} of 3.0 MiB")
    page.goto(f"{node.url}/console#/users")
    page.wait_for_selector(f"#my-storage:text-is('You store {fmt_bytes(used)} of 3.0 MiB.')")
    shot(page, "storage-user")
    page.evaluate("sessionStorage.clear()")
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/users")
    cell = page.wait_for_selector(".storage[data-user='console-dora']")
    assert cell.text_content() == f"{fmt_bytes(used)} of 3.0 MiB"
    page.click("tr:has(td:text-is('console-dora')) button:text-is('Topics and grants')")
    page.wait_for_selector(f"#holdings-storage:text-is('Stores {fmt_bytes(used)} of 3.0 MiB')")
    assert page.input_value("#storage-limit input[name=limit_mib]") == "3"
    page.fill("#storage-limit input[name=limit_mib]", "5")
    page.click("#storage-limit button[type=submit]")
    page.wait_for_selector(f"#holdings-storage:text-is('Stores {fmt_bytes(used)} of 5.0 MiB')")
    quotas = http.json("GET", "/v1/users/console-dora", headers=admin)["quotas"]
    assert quotas == {"storage_bytes_max": 5 * mib, "produce_bytes_per_s": 10 * mib}, "other limits kept"
    shot(page, "storage-admin")


def test_the_cluster_page_shows_the_coordinator_and_counts_what_the_user_may_see(node, page, http, admin):
    http.json("POST", "/v1/users", 201, body={"username": "console-erin", "password": "erin-password"},
              headers=admin)
    erin = bearer(login(http, "console-erin", "erin-password"))
    http.json("POST", "/v1/topics", 201, body={"name": "console.erin", "partitions": 3}, headers=erin)
    http.json("POST", "/v1/topics", 201, body={"name": "console.not-erins", "partitions": 4}, headers=admin)
    http.json("POST", "/v1/groups/console.erin-readers/members", body={"topics": ["console.erin"]}, headers=erin)
    log_in(page, node.url, "console-erin", "erin-password")
    page.wait_for_selector("[data-stat=partitions] .n")
    assert page.text_content("[data-stat=partitions] .n") == "3"
    assert page.text_content("[data-stat=topics] .n") == "1"
    assert page.query_selector("[data-stat=internal]") is None
    assert page.text_content("[data-stat=coordinator] .n") == "embedded (no etcd)"
    assert page.query_selector("[data-stat=session]") is None and "etcd session" not in page.content()
    shot(page, "cluster-user")
    page.evaluate("sessionStorage.clear()")
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.wait_for_selector("[data-stat=internal] .n")
    topics = listed(http, admin, internal=True)
    users = sum(t["partitions"] for t in topics if not t["name"].startswith("__"))
    internal = sum(t["partitions"] for t in topics if t["name"].startswith("__"))
    assert page.text_content("[data-stat=partitions] .n") == str(users)
    assert page.text_content("[data-stat=internal] .n") == str(internal) and internal > 0
    assert page.text_content("[data-stat=coordinator] .n") == "embedded (no etcd)"
    assert page.query_selector("[data-stat=session]") is None
    assert page.text_content("[data-stat=disk] .n") != "\u2013", "an admin is told the node's state"
    shot(page, "cluster-admin")


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A one-node cluster on a real etcd, started only for the test that asks for it."""
    with running_cluster(str(tmp_path_factory.mktemp("console-etcd")), size=1) as running:
        yield running


def test_on_etcd_the_cluster_page_shows_the_nodes_session_to_an_admin_only(etcd_cluster, page):
    url = etcd_cluster.nodes[1].url
    http = etcd_cluster.http(1)
    admin = bearer(login(http, ADMIN, ADMIN_PASSWORD))
    http.json("POST", "/v1/users", 201, body={"username": "console-finn", "password": "finn-password"},
              headers=admin)
    log_in(page, url, ADMIN, ADMIN_PASSWORD)
    page.wait_for_selector("[data-stat=session] .n")
    assert page.text_content("[data-stat=coordinator] .n") == "etcd"
    assert page.text_content("[data-stat=session] .n") == "alive"
    shot(page, "cluster-etcd")
    page.evaluate("sessionStorage.clear()")
    log_in(page, url, "console-finn", "finn-password")
    page.wait_for_selector("[data-stat=coordinator] .n")
    assert page.text_content("[data-stat=coordinator] .n") == "etcd"
    assert page.query_selector("[data-stat=session]") is None, "a node's session is for operators"


def test_a_browser_at_the_root_lands_on_the_console_with_its_icon(node, page):
    page.goto(f"{node.url}/")
    page.wait_for_selector("#login input[name=username]")
    assert page.url == f"{node.url}/console"
    icon = page.evaluate("() => document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).headers["content-type"] == "image/svg+xml"
