"""Fuzzing the OpenAPI document (schemathesis) against a real node with auth on, as an admin: no
operation answers 5xx to what the document lets a client send or to input just outside it, every
error is a problem+json body naming its status and code, and every status is one the document
declares for that operation.

The run is bounded (``MAX_EXAMPLES`` per operation plus schemathesis's boundary cases) and
deterministic (a fixed seed, derandomized, no example database), so a failure replays."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

import http_api.app  # noqa: F401  (registers the routes the document lists)
from http_api.openapi import openapi_document
from logbroker import launcher
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

SEED: Final = 20261126
MAX_EXAMPLES: Final = 25  # fuzzing-phase cases per operation; the coverage phase adds its boundary cases
REQUEST_TIMEOUT_S: Final = 30.0  # creating 1024 partitions takes ~2 s on an idle 2-core machine
STREAM_READ_S: Final = 1.5
ADMIN_TOKEN: dict[str, str] = {}  # the Authorization header of every call, set once the node is up (for the checks)
TOPIC, QUEUE, USER, GROUP = "fuzz-topic", "fuzz-queue", "fuzz-user", "fuzz-group"
# Stands for the member id the node gave the admin's join in ``resources`` (known only then): a case
# that names it is sent with the real id, so heartbeats, commits and the member stream get past 404.
MEMBER: Final = "fuzz-member"
# Schemathesis's coverage phase (its boundary cases) names every path parameter "0", whatever the
# dictionaries say: a topic and a group of that name let those cases reach the handlers too.
COVERAGE_NAME: Final = "0"
# Calls that would end the fuzzing admin's own session (its tokens revoked, its account gone): aimed
# at the admin they are sent for USER instead, or every later case would only see 401.
ENDS_OWN_SESSION: Final = {("PUT", "/v1/users/{name}/password"), ("POST", "/v1/users/{name}/revoke-tokens"),
                           ("DELETE", "/v1/users/{name}")}
# The one 5xx allowed, and only here: the node's partition budget (a quarter of its descriptor limit,
# logbroker/descriptors.py) is full. An admin is exempt from partition quotas, so a few cases of up to
# 1024 partitions fill it; a client cannot tell this apart from a node that is full for real, and
# deleting topics frees it (``resources`` does, before each operation).
PARTITION_BUDGET: Final = {("POST", "/v1/topics"), ("POST", "/v1/topics/{name}/partitions")}

# The document is a pure function of the route table, so the cases are generated at collection (one
# test per operation); the node serves the same document (checked below).
schema = schemathesis.openapi.from_dict(openapi_document(), config=schemathesis.Config.from_dict({
    "seed": SEED,
    "request-timeout": REQUEST_TIMEOUT_S,
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none", "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
    # A push stream never ends: read it for a bounded time (or its first events), then close it.
    "operations": [{"include-path-regex": "/stream$", "request-timeout": STREAM_READ_S, "max-stream-events": 3}],
    # Half the names are ones that exist, so cases get past "unknown topic" into the handlers.
    "dictionaries": {"names": {"values": [TOPIC, QUEUE, USER]}, "topics": {"values": [TOPIC, QUEUE]},
                     "groups": {"values": [GROUP]}, "members": {"values": [MEMBER]},
                     "partitions": {"values": [0, 1]}},
    "parameters": {"path.name": {"dictionary": "names", "probability": 0.5},
                   "path.group": {"dictionary": "groups", "probability": 0.5},
                   "path.partition": {"dictionary": "partitions", "probability": 0.5},
                   "path.member": {"dictionary": "members", "probability": 0.5},
                   "body.member_id": {"dictionary": "members", "probability": 0.5},
                   "body.topic": {"dictionary": "topics", "probability": 0.5},
                   "body.topics[*]": {"dictionary": "topics", "probability": 0.5},
                   "body.user": {"dictionary": "names", "probability": 0.5}},
}))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[launcher.NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("fuzz")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin_headers(node: launcher.NodeProcess) -> dict[str, str]:
    ADMIN_TOKEN.update(bearer(login(Http(node.url), ADMIN, ADMIN_PASSWORD)))
    return ADMIN_TOKEN


@pytest.fixture
def resources(node: launcher.NodeProcess, admin_headers: dict[str, str]) -> str:
    """Before each operation is fuzzed: the topics earlier operations created are gone, and the
    named topic, queue, user and group exist (a fuzzed DELETE may have removed them). Returns the
    admin's member id in the group."""
    http = Http(node.url)
    kept = {TOPIC, QUEUE, COVERAGE_NAME}
    for topic in http.json("GET", "/v1/topics", headers=admin_headers)["topics"]:
        if topic["name"] not in kept and not (topic["name"].startswith(QUEUE) and topic["name"].endswith(".dlq")):
            assert http.call("DELETE", f"/v1/topics/{topic['name']}", headers=admin_headers).status in (204, 404)
    for body, path in (({"name": TOPIC, "partitions": 2}, f"/v1/topics/{TOPIC}/records"),
                       ({"name": COVERAGE_NAME, "partitions": 2}, f"/v1/topics/{COVERAGE_NAME}/records"),
                       ({"name": QUEUE, "partitions": 2, "kind": "queue"}, f"/v1/queues/{QUEUE}/messages")):
        created = http.call("POST", "/v1/topics", body=body, headers=admin_headers)
        assert created.status in (201, 409), created
        if created.status == 201:
            records = {"records": [{"value": f"v{i}", "partition": i % 2} for i in range(6)]}
            http.json("POST", path, body=records, headers=admin_headers)
    user = http.call("POST", "/v1/users", body={"username": USER, "password": "a-password-for-fuzzing"},
                     headers=admin_headers)
    assert user.status in (201, 409), user
    assert http.call("POST", f"/v1/groups/{COVERAGE_NAME}/members", body={"topics": [COVERAGE_NAME]},
                     headers=admin_headers).status == 200
    joined = http.call("POST", f"/v1/groups/{GROUP}/members", body={"topics": [TOPIC]}, headers=admin_headers)
    assert joined.status == 200, joined
    return str(joined.json()["member_id"])


def no_server_error(ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]) -> bool | None:
    """``not_a_server_error``, but for the partition budget's 503 where partitions are created."""
    if (response.status_code == 503 and (case.method.upper(), case.path) in PARTITION_BUDGET
            and response.json().get("code") == "too_many_open_files"):
        return None
    return not_a_server_error(ctx, response, case)


def errors_are_problems(ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]) -> None:
    """Every 4xx/5xx is ``application/problem+json`` whose ``status`` is the response's and whose
    ``code`` names the error (one error table for HTTP, http_api/errors.py)."""
    if response.status_code < 400:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/problem+json"), (response.status_code, content_type)
    problem = response.json()
    assert problem["status"] == response.status_code, problem
    assert isinstance(problem["code"], str) and problem["code"], problem
    assert isinstance(problem["detail"], str), problem


def session_alive(ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]) -> None:
    """A call that carried the admin's token is never refused as unauthenticated off the login
    route: else the session ended and the cases after it would test nothing but the authentication
    middleware. (Schemathesis's own cases without a token or with a wrong one get 401, rightly.)"""
    sent = response.request.headers.get("Authorization")
    if case.path != "/v1/auth/token" and sent is not None and sent == ADMIN_TOKEN.get("Authorization"):
        assert response.status_code != 401, response.text[:300]


COUNTED: Final = re.compile(
    r'^logbroker_http_requests_total\{method="([A-Z]+)",route="([^"]*)",status="(\d+)"\} (\S+)$', re.MULTILINE)
CHECKS: Final = [no_server_error, errors_are_problems, session_alive, status_code_conformance]


def test_the_node_serves_the_fuzzed_document(node: launcher.NodeProcess) -> None:
    assert Http(node.url).json("GET", "/v1/openapi.json") == json.loads(json.dumps(openapi_document()))


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # `resources` runs once per operation
def test_no_operation_answers_5xx_and_errors_are_problems(case: schemathesis.Case[Any], node: launcher.NodeProcess,
                                                          admin_headers: dict[str, str], resources: str) -> None:
    if (case.method.upper(), case.path) in ENDS_OWN_SESSION and case.path_parameters == {"name": ADMIN}:
        case.path_parameters = {"name": USER}
    if case.path_parameters and case.path_parameters.get("member") == MEMBER:
        case.path_parameters = {**case.path_parameters, "member": resources}
    if isinstance(case.body, dict) and case.body.get("member_id") == MEMBER:
        case.body = {**case.body, "member_id": resources}
    case.call_and_validate(base_url=node.url, headers=admin_headers, checks=CHECKS)


def test_the_node_counted_no_server_error(node: launcher.NodeProcess, admin_headers: dict[str, str]) -> None:
    """After the run (this test comes after it in the module), by the node's own count: no request
    ended in a 5xx, not even one whose client had gone (a stream closed by its reader), beyond the
    partition budget's 503 where partitions are created."""
    metrics = Http(node.url).call("GET", "/metrics", headers=admin_headers)
    assert metrics.status == 200
    counted = COUNTED.findall(metrics.data.decode())
    assert counted, "the node counted no request at all"
    for method, route, status, count in counted:
        if int(status) >= 500 and float(count) > 0:
            assert status == "503" and (method, route) in PARTITION_BUDGET, (method, route, status, count)
