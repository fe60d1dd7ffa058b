"""Which requests may create the topic or queue they name (node setting ``auto_create``, decision
0311).

First use is a write: a produce (``POST /v1/topics/{name}/records``) makes a topic, a send
(``POST /v1/queues/{name}/messages``) a queue. A fetch, a receive, a describe or a metadata call
never creates anything (unlike Kafka's ``auto.create.topics.enable``, which creates on a metadata
request, so a consumer's typo makes a topic). Both routes are served by the broker's front door
(``logbroker.api.BrokerApi.publish`` and ``queue_send``, decisions 0373 and 0402), which creates
the name once the body has been read and checked, then authorizes, so a request refused on its
body creates nothing; this table names those routes (a test holds it to the route table).
"""

from __future__ import annotations

from typing import Final

from logbroker.first_use import Kind

FIRST_USE: Final[dict[tuple[str, str], Kind]] = {
    ("POST", "/v1/topics/{name}/records"): "topic",
    ("POST", "/v1/queues/{name}/messages"): "queue",
}


def first_use_kind(method: str, path: str, auto_create: str) -> Kind | None:
    """The kind a request to route ``(method, path)`` creates when its name is missing, on a node
    whose ``auto_create`` is ``auto_create``; None when it creates nothing."""
    return FIRST_USE.get((method, path)) if auto_create == "on" else None
