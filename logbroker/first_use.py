"""Creating a topic or queue on its first use (node setting ``auto_create``, decision 0311): one
place for every protocol that writes (HTTP produce and send, gRPC Publish).

Invariant: a name is created on first use only by a write of an authenticated caller, with the
defaults, owned by that caller (no owner with authentication off), through ``TopicAdmin.create_topic``
(the same name check, placement and coordinator as an explicit create), and only while the
caller stays within ``topics_max``, ``partitions_max`` and the node's ``auto_create_owned_max``;
checked and created under the caller's creation lock, so two concurrent first uses by one caller
cannot both pass a check that only one fits. Admins are exempt, as from every holding limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from coordinator.errors import TopicExistsError, UnknownTopicError
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.usage import RETRY_AFTER_S, check_limit
from logbroker.errors import TooManyRequestsError
from logbroker.ownership import creation_cost, holdings

if TYPE_CHECKING:
    from logbroker.ports import TopicCreator

Kind = Literal["topic", "queue"]
OWNED_LIMIT: Final = "auto_create_owned_max"


async def missing(node: TopicCreator, name: str) -> bool:
    """Whether a write to ``name`` would create it: auto-create is on and no topic has the name."""
    if node.config.auto_create != "on":
        return False
    try:
        await node.coordinator.get_topic(name)
    except UnknownTopicError:
        return True
    return False


def check_allowance(principal: Principal, owned: int, kind: Kind, owned_max: int) -> None:
    """Refuse (429 naming ``auto_create_owned_max``) when ``principal``, owning ``owned`` topics
    and queues, may not have one more ``kind`` made on first use (a queue is two names: it and
    its dead-letter topic)."""
    more = 2 if kind == "queue" else 1
    if principal.is_admin or owned + more <= owned_max:
        return
    raise TooManyRequestsError(f"{principal.name!r} owns {owned} topics and queues; {OWNED_LIMIT} is {owned_max}, "
                               "so no more are created on first use (create it explicitly)",
                               retry_after_s=RETRY_AFTER_S, limit=OWNED_LIMIT, limit_value=owned_max)


async def create(node: TopicCreator, name: str, kind: Kind, principal: Principal, limits: QuotaLimits) -> None:
    """Create ``name`` as a ``kind`` owned by ``principal`` unless someone created it meanwhile
    (the caller then authorizes the write against the existing one)."""
    body = {"name": name, "kind": kind}
    owner = principal.name if node.auth.enabled else None
    try:
        if principal.is_admin:
            await node.topics.create_topic(body, owner=owner)
            return
        async with node.auth.usage.creating(principal.name):
            owned, partitions = holdings(principal.name, await node.coordinator.list_topics())
            check_allowance(principal, owned, kind, node.config.auto_create_owned_max)
            check_limit(principal, limits, "topics_max", owned, 2 if kind == "queue" else 1)
            check_limit(principal, limits, "partitions_max", partitions, creation_cost(kind, 1, new_dead_letter=True))
            await node.topics.create_topic(body, owner=owner)
    except TopicExistsError:
        pass
