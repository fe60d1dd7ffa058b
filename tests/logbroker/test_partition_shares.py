"""A user at the default partition quota cannot fill the node's descriptor budget: through a real
node under a small descriptor limit (400: a budget of 100 partitions), a user creating queues (each
costing its partitions, as many state partitions, and a dead-letter topic) is refused with 429
``partitions_max`` at a quarter of the budget, and the admin (and another user) can still create
topics afterwards instead of getting 503 ``too_many_open_files``."""

from __future__ import annotations

from tests.http_api.conftest import Http
from tests.logbroker.test_descriptor_budget import LimitedNode
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login

PASSWORD = "password-of-a-user"
NODE_PARTITIONS = 100  # a quarter of the descriptor limit of LimitedNode
USER_SHARE = NODE_PARTITIONS // 4


def user(http: Http, admin: dict[str, str], name: str) -> dict[str, str]:
    http.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD}, headers=admin)
    return bearer(login(http, name, PASSWORD))


def fill(http: Http, token: dict[str, str], prefix: str, body: dict[str, object]):
    """Create ``body`` under new names until refused (bounded by the node's budget): what was
    created and the refusal."""
    created = []
    for i in range(NODE_PARTITIONS):
        reply = http.call("POST", "/v1/topics", body={**body, "name": f"{prefix}{i}"}, headers=token)
        if reply.status != 201:
            return created, reply
        created.append(f"{prefix}{i}")
    raise AssertionError("never refused")


def test_a_user_at_the_default_quota_leaves_room_for_the_admin_and_others(tmp_path):
    with LimitedNode(str(tmp_path / "node"), *AUTH_ARGS) as node:
        http = Http(node.url)
        admin = bearer(login(http, ADMIN, ADMIN_PASSWORD))
        mallory = user(http, admin, "mallory")
        queues, refused = fill(http, mallory, "mq", {"kind": "queue", "partitions": 5})
        assert refused.status == 429, (refused.status, refused.data[:300])
        problem = refused.json()
        assert problem["limit"] == "partitions_max" and problem["limit_value"] == USER_SHARE
        assert len(queues) == USER_SHARE // 11  # five partitions, five state partitions, a dead-letter topic
        topics, refused = fill(http, mallory, "mt", {"partitions": 1})
        assert refused.status == 429 and refused.json()["limit"] == "partitions_max"
        assert len(queues) * 11 + len(topics) == USER_SHARE
        grow = http.call("POST", f"/v1/topics/{queues[0]}/partitions", body={"partitions": 6}, headers=mallory)
        assert grow.status == 429 and grow.json()["limit"] == "partitions_max"
        http.json("POST", "/v1/topics", 201, body={"name": "admin.t", "partitions": 10}, headers=admin)
        trent = user(http, admin, "trent")
        http.json("POST", "/v1/topics", 201, body={"name": "trent.q", "kind": "queue", "partitions": 5},
                  headers=trent)
        http.json("POST", "/v1/topics/admin.t/records", body={"records": [{"value": "still", "partition": 9}]},
                  headers=admin)
