"""The embedded coordinator persists topics across restarts and validates what it is given."""

from __future__ import annotations

import pytest

from coordinator.errors import (
    CoordinatorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownGroupRecordError,
    UnknownTopicError,
    UnknownUserError,
)
from coordinator.local import STATE_FILE, LocalCoordinator
from coordinator.models import NodeInfo, TopicSpec, validate_name
from coordinator.users import GroupRecord, UserRecord
from segments.config import LogConfig

NODE = NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2")


@pytest.mark.asyncio
async def test_topics_survive_a_restart(tmp_path):
    first = LocalCoordinator(str(tmp_path), NODE)
    await first.start()
    spec = TopicSpec.parse({"name": "t", "partitions": 3, "config": {"retention_ms": 5}}, base_config=LogConfig())
    meta = await first.create_topic(spec, owner="alice")
    with pytest.raises(TopicExistsError):
        await first.create_topic(spec, owner="bob")
    second = LocalCoordinator(str(tmp_path), NODE)
    await second.start()
    again = await second.get_topic("t")
    assert again == meta and again.owner == "alice"
    states = await second.partition_states("t")
    assert [(s.partition, s.leader, s.leader_epoch, s.replicas) for s in states] == [(p, 1, 1, (1,)) for p in range(3)]
    await second.delete_topic("t")
    third = LocalCoordinator(str(tmp_path), NODE)
    await third.start()
    with pytest.raises(UnknownTopicError):
        await third.get_topic("t")


@pytest.mark.asyncio
async def test_replication_beyond_one_node_is_refused(tmp_path):
    coordinator = LocalCoordinator(str(tmp_path), NODE)
    await coordinator.start()
    spec = TopicSpec.parse({"name": "t", "replication_factor": 2}, base_config=LogConfig())
    with pytest.raises(InvalidTopicError):
        await coordinator.create_topic(spec, owner=None)
    assert await coordinator.list_topics() == []


@pytest.mark.asyncio
async def test_unreadable_state_is_a_clear_error(tmp_path):
    (tmp_path / STATE_FILE).write_text("{broken")
    with pytest.raises(CoordinatorError):
        await LocalCoordinator(str(tmp_path), NODE).start()


@pytest.mark.parametrize("name", ["ok", "a.b-c_d", "x" * 200])
def test_good_names(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "x" * 201, "__c", None, 5, "ü"])
def test_bad_names(name):
    with pytest.raises(InvalidTopicError):
        validate_name(name)


@pytest.mark.asyncio
async def test_group_owners_and_grants_survive_a_restart_and_follow_user_deletion(tmp_path):
    first = LocalCoordinator(str(tmp_path), NODE)
    await first.start()
    for name in ("alice", "bob", "carol"):
        await first.create_user(UserRecord(name, "user", "hash", 0))
    claimed = await first.claim_group("g", "alice")
    assert claimed.owner == "alice" and (await first.claim_group("g", "bob")) == claimed, "the first claim holds"
    await first.set_group_acl("g", "bob", frozenset({"read"}))
    with pytest.raises(UnknownGroupRecordError):
        await first.set_group_acl("unclaimed", "bob", frozenset({"read"}))
    with pytest.raises(UnknownUserError):
        await first.set_group_acl("g", "nobody", frozenset({"read"}))
    await first.claim_group("gone", "bob")
    await first.delete_group("gone")
    second = LocalCoordinator(str(tmp_path), NODE)
    await second.start()
    assert [g.name for g in await second.list_group_records()] == ["g"]
    assert await second.get_group("g") == GroupRecord("g", "alice", {"bob": frozenset({"read"})}, claimed.created_ms)
    await second.delete_user("bob")
    await second.delete_user("alice", reassign_to="carol")
    assert await second.get_group("g") == GroupRecord("g", "carol", {}, claimed.created_ms)


@pytest.mark.asyncio
async def test_a_topic_is_found_by_its_id_until_deleted_and_after_a_restart(tmp_path):
    first = LocalCoordinator(str(tmp_path), NODE)
    await first.start()
    spec = TopicSpec.parse({"name": "t", "partitions": 1}, base_config=LogConfig())
    old = await first.create_topic(spec, owner=None)
    assert first.cached_topic_by_id(old.topic_id) == old
    again = LocalCoordinator(str(tmp_path), NODE)
    await again.start()
    assert again.cached_topic_by_id(old.topic_id) == old, "the map is rebuilt from the stored state"
    await first.delete_topic("t")
    assert first.cached_topic_by_id(old.topic_id) is None
    new = await first.create_topic(spec, owner=None)
    assert new.topic_id != old.topic_id
    assert first.cached_topic_by_id(old.topic_id) is None and first.cached_topic_by_id(new.topic_id) == new
    assert first.cached_topic_by_id("") is None
