"""The ``Coordinator`` interface: what a node needs from cluster coordination.

``LocalCoordinator`` (one node, state in the data dir) implements it now; ``EtcdCoordinator``
(membership leases, elections with epochs, watches) implements the same calls for clusters.
Every method is async and bounded by the implementation's own timeouts.
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Callable, Mapping
from typing import Any

from coordinator.errors import InvalidTopicError
from coordinator.models import (
    ClusterNode,
    MetadataChange,
    NodeInfo,
    NodeSession,
    PartitionState,
    TopicMetadata,
    TopicSpec,
)
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
    async def create_topic(self, spec: TopicSpec, owner: str | None, *, on_node: int | None = None,
                           replicas: tuple[int, ...] | None = None) -> TopicMetadata:
        """Create a topic (raises ``TopicExistsError``, ``InvalidTopicError``). A cluster's queue
        keeps all its partitions together (decision 0198): ``on_node`` gives every partition one
        replica list led preferably by that node, its followers placed as usual; ``replicas``
        gives every partition exactly that list (a queue's state log follows its queue)."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicMetadata:
        """Delete a topic and return what it was (raises ``UnknownTopicError``)."""

    async def add_partitions(self, name: str, partitions: int) -> TopicMetadata:
        """Raise the partition count of a topic to ``partitions`` (raises ``UnknownTopicError``,
        ``InvalidTopicError`` when it is not more than now). Coordinators that cannot do it yet
        say so with ``InvalidTopicError``."""
        raise InvalidTopicError("this coordinator cannot add partitions yet")

    async def set_topic_config(self, name: str,
                               update: Callable[[TopicMetadata], Mapping[str, Any]]) -> TopicMetadata:
        """Replace a topic's config with ``update(current)`` in one guarded change (``update``
        raises to refuse; it may run again on a newer ``current`` when the topic changed meanwhile).
        Returns the topic as stored (raises ``UnknownTopicError``)."""
        raise InvalidTopicError("this coordinator cannot change a topic's config")

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

    # ---- cluster vocabulary (DESIGN §5). The single node's answers are the defaults here: ------
    # ---- it is always alive, leads every partition at epoch 1, and nothing changes under it. ---

    def advertise(self, node: NodeInfo) -> None:
        """Set how clients and other nodes reach this node, before ``start`` (the listeners bind
        first, so the real ports are known)."""
        return None

    @property
    def is_cluster(self) -> bool:
        """True when other nodes may hold partitions (an etcd coordinator)."""
        return False

    def session_alive(self) -> bool:
        """True while this node's session (its lease) is live: only then is it ready."""
        return True

    def lease_valid_until(self) -> float:
        """The ``time.monotonic()`` after which this node can no longer prove its leaderships
        (last successful keepalive + TTL - margin): the write path fences on it."""
        return math.inf

    def on_change(self, listener: Callable[[MetadataChange], None]) -> None:
        """Call ``listener`` (on the event loop, never concurrently) after each change the
        metadata cache applies. A single node's metadata changes only through its own calls."""
        return None

    def cached_topic(self, name: str) -> TopicMetadata | None:
        """``get_topic`` from the cache, without awaiting (the request path's lookup)."""
        return None

    def cached_topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        """The live topic whose ``topic_id`` (hex) this is, from the cache, without awaiting (one
        dict lookup: Kafka's Fetch names topics by id). None for an id no live topic has, the
        old id of a topic deleted and made again among them."""
        return None

    def cached_leaderless_partitions(self) -> int:
        """Partitions of the cluster without a leader, from the cache, without awaiting (a single
        node: none here; its partitions are its own logs)."""
        return 0

    def cached_partition(self, topic: str, partition: int) -> PartitionState | None:
        """Placement and leadership of one partition from the cache (None: unknown, or no leader
        when ``leader`` is -1), without awaiting."""
        return None

    def cached_node(self, node_id: int) -> NodeInfo | None:
        """A live node's addresses from the cache (None when it is not alive)."""
        return None

    def node_session(self, node_id: int) -> NodeSession | None:
        """The current registration of live node ``node_id`` (None: not alive, or no sessions here)."""
        return None

    async def witness_crash(self, session: NodeSession) -> frozenset[int] | None:
        """Record that this node found every address of ``session`` refusing connections
        (decision 0260); the distinct witnesses of that session so far, or None when the
        registration changed meanwhile (nothing recorded)."""
        return None

    async def end_session(self, session: NodeSession) -> bool:
        """End another node's session at once (its leaderships with it), on the witnesses'
        evidence that its process is gone; False when that could not be done."""
        return False

    def on_crash_witness(self, listener: Callable[[int], None]) -> None:
        """Call ``listener`` with the node id whenever another node records a crash witness."""
        return None

    async def cluster_nodes(self) -> list[ClusterNode]:
        """Every node the cluster knows (registered once), with ``alive`` from its lease."""
        return [ClusterNode(info, True) for info in await self.nodes()]

    async def elect(self, topic: str, partition: int) -> PartitionState | None:
        """Stand for leadership of a partition (this node must be in its ISR): one etcd
        transaction that bumps the epoch. The new state when won; None when another node leads
        or the partition changed meanwhile (the watch then shows who won)."""
        return None

    async def resign(self, topic: str, partition: int) -> None:
        """Give up leadership of a partition if this node holds it (preferred-leader hand-back,
        orderly shutdown)."""
        return None

    async def set_isr(self, topic: str, partition: int, leader_epoch: int, isr: tuple[int, ...],
                      elr: tuple[int, ...] = (), *,
                      based_on: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> PartitionState:
        """Replace the ISR and the eligible leader replicas (``coordinator.eligibility``), guarded
        by ``leader_epoch`` (``NotLeaderError``-like ``CoordinatorError`` when the epoch moved on)
        and, with ``based_on``, by the stored ISR and ELR being those (``CoordinatorError`` if not)."""
        raise InvalidTopicError("this coordinator has a single replica per partition")

    async def withdraw(self, topic: str, partition: int) -> PartitionState | None:
        """Leave the partition's ISR and ELR after an unclean restart while another member stays
        eligible (``eligibility.withdrawn``); None when nothing changed. A single node is the
        last eligible replica of its partitions: nothing changes."""
        return None

    async def hand_over(self, topic: str, partition: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                        leader: int, *, expected: tuple[int, ...] | None = None) -> None:
        """Move leadership away from ``leader`` (which must lead now): set ``replicas`` and
        ``isr`` and clear the leader in one guarded change, so the first live member of ``isr``
        is elected next; only if the replica list is still ``expected`` (when given).
        ``StaleEpochError`` when the guard fails (nothing changed). Used once a partition's data
        was copied to its new preferred replica."""
        raise InvalidTopicError("this coordinator has a single node")

    def exclusive(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the cluster-wide lock ``name`` for the block (``CoordinatorUnavailableError`` at
        once when another node holds it). A single node has no one to exclude."""
        return contextlib.nullcontext()

    async def reassign(self, topic: str, partition: int, replicas: tuple[int, ...]) -> PartitionState:
        """Set a partition's replica list (preferred leader first); used by rebalance and
        decommission."""
        raise InvalidTopicError("this coordinator has a single node")

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

    async def count_groups_owned(self, user: str) -> int:
        """How many claimed groups ``user`` owns (checked against the per-user groups limit on
        every new group). This default reads every record; an implementation keeps a count."""
        return sum(1 for record in await self.list_group_records() if record.owner == user)

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

    # ---- usage records (decision 0298) ---------------------------------------------------------

    @abc.abstractmethod
    async def put_usage(self, hour_ms: int, node_id: int, rows: list[list[Any]]) -> None:
        """Store ``node_id``'s usage rows of the hour starting at ``hour_ms`` (its whole state for
        that hour: it replaces what the node stored for the hour before)."""

    @abc.abstractmethod
    async def usage_between(self, from_hour_ms: int, to_ms: int) -> list[tuple[int, int, list[list[Any]]]]:
        """Every node's stored usage of the hours starting in [``from_hour_ms``, ``to_ms``), as
        (hour, node, rows); records that do not verify or parse are left out."""

    @abc.abstractmethod
    async def drop_usage_before(self, hour_ms: int) -> None:
        """Forget every node's usage of the hours before ``hour_ms`` (retention)."""
