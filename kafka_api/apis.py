"""The one table of the Kafka APIs this listener serves: key, name, the versions it answers, and
whether a client may call it before it has authenticated. ApiVersions advertises exactly this
table and the server dispatches from it, so an API is advertised if and only if it is served
(an API or version not here is answered UNSUPPORTED_VERSION, or the connection closed, as a Kafka
broker does)."""

from __future__ import annotations

import dataclasses
from typing import Final


@dataclasses.dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str  # the handler: a method of ``KafkaHandlers`` (dotted: of one of its parts, e.g. ``admin.create_topics``)
    min_version: int
    max_version: int
    before_auth: bool = False

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


API_VERSIONS_KEY: Final = 18
SASL_HANDSHAKE_KEY: Final = 17
SASL_AUTHENTICATE_KEY: Final = 36

APIS: Final[tuple[Api, ...]] = (
    Api(0, "produce", 3, 9),
    Api(1, "fetch", 4, 16),  # v13 names topics by id (kafka_api.topic_ids); v16 names a moved leader (KIP-951)
    Api(2, "list_offsets", 1, 6),  # v7 asks for the greatest timestamp (-3)
    Api(3, "metadata", 1, 12),
    Api(8, "groups.offset_commit", 2, 8),
    Api(9, "groups.offset_fetch", 2, 7),  # v1 has no group-level error code; v8 batches groups
    Api(10, "groups.find_coordinator", 0, 4),
    Api(11, "groups.join_group", 0, 7),
    Api(12, "groups.heartbeat", 0, 4),
    Api(13, "groups.leave_group", 0, 4),
    Api(14, "groups.sync_group", 0, 5),
    Api(15, "groups.describe_groups", 0, 5),  # v6 answers an unknown group GROUP_ID_NOT_FOUND, not Dead
    Api(16, "groups.list_groups", 0, 5),  # v4 filters by state, v5 by type (every group here is classic)
    Api(22, "init_producer_id", 0, 4),
    Api(SASL_HANDSHAKE_KEY, "sasl_handshake", 0, 1, before_auth=True),  # after v0, SASL goes unframed
    Api(API_VERSIONS_KEY, "api_versions", 0, 3, before_auth=True),
    Api(SASL_AUTHENTICATE_KEY, "sasl_authenticate", 0, 2, before_auth=True),
    Api(19, "admin.create_topics", 2, 7),
    Api(20, "admin.delete_topics", 1, 6),  # v6 names topics by name or id
    Api(32, "admin.describe_configs", 1, 4),
    Api(33, "admin.alter_configs", 0, 2),
    Api(37, "admin.create_partitions", 0, 3),
    Api(44, "admin.incremental_alter_configs", 0, 1),
    Api(60, "admin.describe_cluster", 0, 2),
)
BY_KEY: Final[dict[int, Api]] = {api.key: api for api in APIS}


def advertised() -> list[dict[str, int]]:
    """ApiVersions' ``api_keys``: every API of the table with its versions."""
    return [{"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version} for a in APIS]
