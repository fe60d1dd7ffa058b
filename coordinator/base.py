"""The ``Coordinator`` interface: what a node needs from cluster coordination.

``LocalCoordinator`` (one node, state in the data dir) implements it now; ``EtcdCoordinator``
(membership leases, elections with epochs, watches) implements the same calls for clusters.
Every method is async and bounded by the implementation's own timeouts.
"""

from __future__ import annotations

import abc

from coordinator.errors import InvalidTopicError
from coordinator.models import NodeInfo, PartitionState, TopicMetadata, TopicSpec
from coordinator.users import Acl, GroupRecord, UserRecord


class Coordinator(abc.ABC):
    @property
    @abc.abstractmethod
    def node_id(self) -> int: ...

    @abc.abstractmethod
    async def start(self) -> None:
        """Load or join the cluster state; register this node."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Leave the cluster and release resources. Idempotent."""

    @abc.abstractmethod
    async def create_topic(self, spec: TopicSpec, owner: str | None) -> TopicMetadata:
        """Create a topic (raises ``TopicExistsError``, ``InvalidTopicError``)."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicMetadata:
        """Delete a topic and return what it was (raises ``UnknownTopicError``)."""

    async def add_partitions(self, name: str, partitions: int) -> TopicMetadata:
        """Raise the partition count of a topic to ``partitions`` (raises ``UnknownTopicError``,
        ``InvalidTopicError`` when it is not more than now). Coordinators that cannot do it yet
        say so with ``InvalidTopicError``."""
        raise InvalidTopicError("this coordinator cannot add partitions yet")

    @abc.abstractmethod
    async def get_topic(self, name: str) -> TopicMetadata:
        """One topic (raises ``UnknownTopicError``)."""

    @abc.abstractmethod
    async def list_topics(self) -> list[TopicMetadata]:
        """Every topic, internal ones included, sorted by name."""

    @abc.abstractmethod
    async def partition_states(self, topic: str) -> list[PartitionState]:
        """Placement and leadership of each partition of ``topic``, by partition number."""

    @abc.abstractmethod
    async def nodes(self) -> list[NodeInfo]:
        """The live nodes."""

    # ---- users, ownership and ACLs (DESIGN §5: users/<name>, acls/<topic>) --------------------

    @abc.abstractmethod
    async def create_user(self, user: UserRecord) -> None:
        """Store a new user (raises ``UserExistsError``)."""

    @abc.abstractmethod
    async def find_user(self, name: str) -> UserRecord | None:
        """The user called ``name``, or None. Called on every authenticated request: keep it cheap."""

    @abc.abstractmethod
    async def list_users(self) -> list[UserRecord]:
        """Every user, sorted by name."""

    @abc.abstractmethod
    async def update_user(self, user: UserRecord) -> None:
        """Replace a stored user (raises ``UnknownUserError``)."""

    @abc.abstractmethod
    async def delete_user(self, name: str, *, reassign_to: str | None = None) -> list[str]:
        """Delete a user and drop their grants. Topics they own move to ``reassign_to``; without it,
        owning any topic raises ``UserOwnsTopicsError``. Returns the reassigned topic names."""

    @abc.abstractmethod
    async def get_acl(self, topic: str) -> Acl:
        """User -> permissions granted on ``topic`` (raises ``UnknownTopicError``)."""

    @abc.abstractmethod
    async def set_acl(self, topic: str, user: str, permissions: frozenset[str]) -> Acl:
        """Set (an empty set revokes) one user's permissions on ``topic``; returns the new ACL."""

    @abc.abstractmethod
    async def set_owner(self, topic: str, owner: str) -> TopicMetadata:
        """Make ``owner`` (an existing user) the owner of ``topic``."""

    # ---- consumer groups as resources (decision 0170: groups/<name>) ---------------------------

    @abc.abstractmethod
    async def get_group(self, name: str) -> GroupRecord | None:
        """The owner and grants of group ``name``, or None when no one has claimed it."""

    @abc.abstractmethod
    async def list_group_records(self) -> list[GroupRecord]:
        """Every claimed group, sorted by name."""

    @abc.abstractmethod
    async def claim_group(self, name: str, owner: str | None) -> GroupRecord:
        """Make ``owner`` the owner of ``name`` unless someone already is; returns the record that
        holds (the existing one when the group was claimed before, by anyone)."""

    @abc.abstractmethod
    async def set_group_acl(self, name: str, user: str, permissions: frozenset[str]) -> GroupRecord:
        """Set (an empty set revokes) one user's permissions on a claimed group (raises
        ``UnknownGroupRecordError`` for an unclaimed one, ``UnknownUserError``)."""

    @abc.abstractmethod
    async def delete_group(self, name: str) -> None:
        """Forget a group's owner and grants (nothing to do for an unclaimed group)."""
