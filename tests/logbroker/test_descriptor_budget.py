"""A node under a small descriptor limit (400): creating partitions stops with a typed 503 before
the descriptors run out, the node keeps answering and producing, its open files stay below the
limit, and it restarts with everything it had."""

from __future__ import annotations

import sys

from tests.http_api.conftest import Http
from tests.support.metrics import scrape, value
from tests.support.nodes import NodeProcess

LIMIT = 400


class LimitedNode(NodeProcess):
    """A node process whose descriptor limit (soft and hard) is ``LIMIT``."""

    def __init__(self, data_dir: str, *extra: str) -> None:
        super().__init__(data_dir, *extra)
        setup = (f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, {LIMIT})); "
                 "sys.argv = ['logbroker'] + sys.argv[1:]; runpy.run_module('logbroker', run_name='__main__')")
        assert self.args[:3] == [sys.executable, "-m", "logbroker"]
        self.args = [sys.executable, "-c", setup, *self.args[3:]]


def metric(http: Http, name: str) -> float:
    return value(scrape(http), name)


def test_partitions_beyond_the_descriptor_budget_get_a_typed_503_and_the_node_stays_up(tmp_path):
    data_dir = str(tmp_path / "node")
    with LimitedNode(data_dir) as node:
        http = Http(node.url)
        assert metric(http, "logbroker_open_files_limit") == LIMIT
        created, refused = [], None
        for i in range(LIMIT):  # bounded: each topic holds ten partitions
            reply = http.call("POST", "/v1/topics", body={"name": f"t{i}", "partitions": 10})
            if reply.status != 201:
                refused = reply
                break
            created.append(f"t{i}")
        assert refused is not None and refused.status == 503, refused
        problem = refused.json()
        assert problem["code"] == "too_many_open_files" and problem["retriable"] is True
        assert "ulimit" in problem["detail"]
        assert f"t{len(created)}" not in {t["name"] for t in http.json("GET", "/v1/topics")["topics"]}
        assert http.json("GET", "/healthz") == {"status": "ok"}
        for name in created:
            http.json("POST", f"/v1/topics/{name}/records", body={"records": [{"value": name, "partition": 9}]})
        assert http.json("GET", f"/v1/topics/{created[-1]}/partitions/9/records?offset=0")["records"][0]["value"] \
            == created[-1]
        assert metric(http, "logbroker_open_files") < LIMIT * 0.75
        assert node.stop() == 0
    with LimitedNode(data_dir) as again:
        http = Http(again.url)
        assert {t["name"] for t in http.json("GET", "/v1/topics")["topics"]} >= set(created)
        http.json("POST", f"/v1/topics/{created[0]}/records", body={"records": [{"value": "after"}]})
        assert metric(http, "logbroker_open_files") < LIMIT * 0.75
