"""The cluster's admin calls refuse bad input clearly, and a single node says it has nothing to
move (the cluster tests run them for real)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"node_id": "4"}', b'{"node_id": -1}',
                                 b'{"node_id": true}', b'{"node_id": 4, "force": true}', b'{"node": 4}'])
def test_a_bad_decommission_body_is_a_400(http, raw):
    reply = http.call("POST", "/v1/cluster/decommission", raw=raw, content_type="application/json")
    assert reply.status == 400, reply.data[:200]
    assert reply.headers["content-type"].startswith("application/problem+json")


def test_a_single_node_has_nothing_to_rebalance(http):
    for path, body in (("/v1/cluster/rebalance", None), ("/v1/cluster/decommission", {"node_id": 1})):
        reply = http.call("POST", path, body=body)
        problem = reply.json()
        assert reply.status == 409 and "single node" in problem["detail"], "a retry could never succeed"
        assert problem["code"] == "not_a_cluster" and problem["retriable"] is False
        assert "Retry-After" not in reply.headers
