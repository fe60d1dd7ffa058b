"""Which requests may create the topic or queue they name (node setting ``auto_create``, decision
0311), and the mark the auth middleware leaves on such a request.

First use is a write: a produce (``POST /v1/topics/{name}/records``) makes a topic, a send
(``POST /v1/queues/{name}/messages``) a queue. A fetch, a receive, a describe or a metadata call
never creates anything (unlike Kafka's ``auto.create.topics.enable``, which creates on a metadata
request, so a consumer's typo makes a topic). The middleware, finding the name missing, lets the
request through to its handler with the kind marked; the handler creates the name once the body
has been read and checked (``user_limits.create_on_first_use``), then authorizes as usual, so a
request refused on its body creates nothing.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from coordinator.models import validate_name
from http_api.keys import NODE
from logbroker import first_use
from logbroker.first_use import Kind

FIRST_USE: Final[dict[tuple[str, str], Kind]] = {
    ("POST", "/v1/topics/{name}/records"): "topic",
    ("POST", "/v1/queues/{name}/messages"): "queue",
}
FIRST_USE_KIND: Final = "logbroker.first_use_kind"


def first_use_kind(method: str, path: str, auto_create: str) -> Kind | None:
    """The kind a request to route ``(method, path)`` creates when its name is missing, on a node
    whose ``auto_create`` is ``auto_create``; None when it creates nothing."""
    return FIRST_USE.get((method, path)) if auto_create == "on" else None


async def mark_first_use(request: web.Request, method: str, path: str) -> bool:
    """True (and the request marked) when it names a missing topic or queue that it may create
    (a malformed name is 400 here, as on every route)."""
    node = request.app[NODE]
    kind = first_use_kind(method, path, node.config.auto_create)
    # Reserved ``__`` names pass here (an internal topic exists and answers as before); creating
    # one is refused by the create's own name check (400).
    if kind is None or not await first_use.missing(node, validate_name(request.match_info["name"], internal=True)):
        return False
    request[FIRST_USE_KIND] = kind
    return True
