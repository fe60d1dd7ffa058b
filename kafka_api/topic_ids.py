"""Topic ids on the Kafka listener (KIP-516, decision 0398): every LogBroker topic has had an id
since it was made (``TopicMetadata.topic_id``, a uuid4's hex), which Kafka clients see as the
same uuid. Newer API versions name topics by id (Fetch v13+, Metadata by id, DeleteTopics v6);
an id resolves through the coordinator's cache in one dict lookup (``cached_topic_by_id``), to
the live topic that has it or to nothing: a topic deleted and made again under its name has a
new id, and its old id names nothing.

An id answers as an unknown one (UNKNOWN_TOPIC_ID, with no name) when no live Kafka topic has it,
and also when its topic is one the caller may not describe: such a caller learns neither the name
nor whether the id exists (a name it may not use is refused TOPIC_AUTHORIZATION_FAILED whether or
not it exists). A caller that may describe the topic sees its id in Metadata anyway, so a refusal
of anything more (read, delete) is answered to it as by name, TOPIC_AUTHORIZATION_FAILED (an
unknown id there would send its client round refreshing metadata forever)."""

from __future__ import annotations

import uuid
from typing import Final

from coordinator.base import Coordinator
from coordinator.models import TopicMetadata
from logbroker.api import BrokerApi
from logbroker.api_types import CallContext
from logbroker.errors import ANY_ERROR
from logbroker.kafka_error_numbers import TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID

ZERO_UUID: Final = uuid.UUID(int=0)


def topic_uuid(meta: TopicMetadata) -> uuid.UUID:
    """The id Kafka clients see for a topic."""
    return as_uuid(meta.topic_id)


def as_uuid(topic_id: str) -> uuid.UUID:
    """A stored topic id as a uuid (ZERO_UUID for one that is not a uuid's hex)."""
    try:
        return uuid.UUID(hex=topic_id)
    except ValueError:
        return ZERO_UUID


def resolve(coordinator: Coordinator, topic_id: uuid.UUID | None) -> TopicMetadata | None:
    """The live Kafka topic (not a queue) with this id, None for any other id (the zero id, a
    null, a deleted topic's, a queue's)."""
    if topic_id is None or topic_id.int == 0:
        return None
    meta = coordinator.cached_topic_by_id(topic_id.hex)
    return meta if meta is not None and meta.kind == "topic" else None


async def by_id_code(api: BrokerApi, ctx: CallContext, name: str, code: int) -> int:
    """The error code a call on topic ``name``, named by its id, answers for ``code`` (its name's
    answer): a refusal is UNKNOWN_TOPIC_ID unless the caller may describe the topic."""
    if code != TOPIC_AUTHORIZATION_FAILED:
        return code
    try:
        await api.authorize(ctx, name, "describe")
    except ANY_ERROR:
        return UNKNOWN_TOPIC_ID
    return code
