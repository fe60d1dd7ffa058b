"""Push streams, produce streams and gRPC partition subscriptions reach the node's reads, writes,
group coordinator, quotas, usage limits and metering only through the front door
(``logbroker.api.BrokerApi`` and its ``streams``, ``logbroker.stream_door``), as the one-shot calls
do: authorization, pacing and charging have one place (decision 0413).

Walks each module's syntax tree (no import side effects) for an attribute named after one of the
node's parts those calls must not touch themselves."""

from __future__ import annotations

import ast
import os

from tests.conftest import ROOT

STREAM_MODULES = ("http_api/streams.py", "http_api/subscribe_stream.py", "http_api/produce_stream.py",
                  "http_api/user_limits.py", "grpc_api/service.py", "grpc_api/groups.py")
NODE_PARTS = frozenset({"reads", "writes", "groups", "quotas", "usage", "meter", "charge", "authorize_topic",
                        "group_access"})


def reached(source: str) -> list[str]:
    """The attributes of ``NODE_PARTS`` that ``source`` reads, in order."""
    return [node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in NODE_PARTS]


def test_stream_handlers_reach_the_node_only_through_the_front_door():
    for module in STREAM_MODULES:
        with open(os.path.join(ROOT, module), encoding="utf-8") as file:
            assert reached(file.read()) == [], module


def test_the_checker_flags_a_handler_that_reads_or_charges_by_itself():
    assert reached("result = await node.reads.fetch(topic, 0, 0, 1, 0)") == ["reads"]
    assert sorted(reached("auth.meter.charge(name, 'fetch', None, 1, topic=t)")) == ["charge", "meter"]
    assert reached("view = await request.app[NODE].groups.heartbeat(g, m, c)") == ["groups"]
    assert reached("with auth.usage.hold(p, limits, 'streams'):\n    pass") == ["usage"]
    assert reached("await node.auth.authorize_topic(principal, topic, 'read')") == ["authorize_topic"]
    assert reached("await front_door.streams.read(ctx, t, 0, 0, max_bytes=1, wait_ms=0, rack=None)") == []
