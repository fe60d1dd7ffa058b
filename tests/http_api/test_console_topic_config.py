"""The console's topic config table in a real browser: the owner or an admin edits it in place
(only changed keys are sent), a refused value is shown and changes nothing, and a user who may
only read the topic sees the table without inputs. Fixtures and helpers are the console tests'."""

from __future__ import annotations

from tests.http_api.test_console import (  # noqa: F401 (fixtures)
    admin,
    browser,
    http,
    log_in,
    node,
    page,
    shot,
)
from tests.support.auth import ADMIN, ADMIN_PASSWORD


def test_an_admin_edits_the_config_table_and_a_reader_only_sees_it(node, page, http, admin):  # noqa: F811
    http.json("POST", "/v1/topics", 201, body={"name": "console.cfg", "config": {"retention_ms": 60000}},
              headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/topics/console.cfg")
    page.wait_for_selector("#topic-config input[data-config='retention_ms']")
    assert page.input_value("#topic-config input[data-config='retention_ms']") == "60000"
    assert page.query_selector("#topic-config input[data-config='segment_index_bytes']") is None
    page.fill("#topic-config input[data-config='retention_ms']", "3600000")
    page.fill("#topic-config input[data-config='flush']", "always")
    page.click("#topic-config button[type=submit]")
    page.wait_for_function("() => document.querySelector(\"#topic-config input[data-config='flush']\")"
                           ".value === 'always' && !document.querySelector('#config-error').textContent")
    config = http.json("GET", "/v1/topics/console.cfg", headers=admin)["config"]
    assert (config["retention_ms"], config["flush"]) == (3600000, "always")
    shot(page, "topic-config")

    page.fill("#topic-config input[data-config='min_insync_replicas']", "5")
    page.click("#topic-config button[type=submit]")
    page.wait_for_selector("#config-error:has-text('min_insync_replicas')")
    assert http.json("GET", "/v1/topics/console.cfg", headers=admin)["config"] == config

    http.json("POST", "/v1/users", 201, body={"username": "console-carol", "password": "carol-password"},
              headers=admin)
    http.json("PUT", "/v1/topics/console.cfg/acl", body={"user": "console-carol", "permissions": ["read"]},
              headers=admin)
    page.click("#logout")
    log_in(page, node.url, "console-carol", "carol-password")
    page.goto(f"{node.url}/console#/topics/console.cfg")
    page.wait_for_selector("h2:has-text('Config')")
    page.wait_for_selector("td:has-text('retention_ms')")
    assert page.query_selector("#topic-config") is None and page.query_selector("input[data-config]") is None


def test_leader_racks_is_edited_as_a_comma_separated_list(node, page, http, admin):  # noqa: F811
    http.json("POST", "/v1/topics", 201, body={"name": "console.racks", "config": {"leader_racks": ["b"]}},
              headers=admin)
    log_in(page, node.url, ADMIN, ADMIN_PASSWORD)
    page.goto(f"{node.url}/console#/topics/console.racks")
    page.wait_for_selector("#topic-config input[data-config='leader_racks']")
    assert page.input_value("#topic-config input[data-config='leader_racks']") == "b"
    page.fill("#topic-config input[data-config='leader_racks']", "c, a")
    page.click("#topic-config button[type=submit]")
    page.wait_for_function("() => document.querySelector(\"#topic-config input[data-config='leader_racks']\")"
                           ".value === 'c,a' && !document.querySelector('#config-error').textContent")
    assert http.json("GET", "/v1/topics/console.racks", headers=admin)["config"]["leader_racks"] == ["c", "a"]
