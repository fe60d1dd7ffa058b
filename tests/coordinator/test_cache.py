"""The metadata cache: applying watch batches in order leaves the same state as loading the
final keys at once; topics exist only with their topics/ key; stale partitions are ignored;
changes name what they touched."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.cache import Entry, MetadataCache
from coordinator.etcd_keys import LeaderRecord, PartitionRecord, encode, leader_key
from coordinator.models import MetadataChange, NodeInfo, PartitionState, TopicMetadata
from coordinator.users import GroupRecord, UserRecord


def topic(name: str, topic_id: str = "id1", partitions: int = 2) -> bytes:
    return encode(TopicMetadata(name, topic_id, partitions, 1, "topic", {}, None, 0).to_json())


def node(node_id: int) -> bytes:
    return encode(NodeInfo(node_id, f"http://n{node_id}", f"n{node_id}:1").to_json())


VALUES = {
    "topics/a": [topic("a"), topic("a", "id2", 3)],
    "topics/b": [topic("b")],
    "partitions/a/0": [PartitionRecord("id1", (1, 2), (1,), 0).encode(),
                       PartitionRecord("id2", (2, 1), (2,), 3).encode()],
    "partitions/a/1": [PartitionRecord("id1", (2,), (2,), 1).encode(),
                       PartitionRecord("id2", (2, 1), (2,), 4, (1,)).encode()],
    "partitions/b/0": [PartitionRecord("id1", (1,), (1,), 0).encode()],
    "leaders/a/0": [LeaderRecord(1, 1).encode(), LeaderRecord(2, 3).encode()],
    "nodes/1": [node(1)],
    "nodes/2": [node(2)],
    "members/1": [node(1)],
    "users/u": [encode(UserRecord("u", "user", "h", 0, user_id="x").to_json())],
    "acls/a": [encode({"u": ["read"]})],
    "groups/g": [encode(GroupRecord("g", "u").to_json())],
    "topics/broken": [b"not json"],
    "something/else": [b"x"],
}
ops = st.lists(st.tuples(st.sampled_from(sorted(VALUES)), st.integers(0, 1), st.booleans()), max_size=40)


def snapshot(cache: MetadataCache) -> object:
    return (cache.topics(), [cache.partitions(t.name) for t in cache.topics()], cache.nodes(), dict(cache.members()),
            cache.users(), dict(cache.acls()), cache.groups(), sorted(cache.assignment().items()))


@given(ops, st.integers(1, 5))
def test_incremental_batches_equal_a_full_load(operations, batch):
    live = MetadataCache()
    store: dict[str, Entry] = {}
    revision = 0
    for i in range(0, len(operations), batch):
        changes: list[tuple[str, Entry | None]] = []
        for key, choice, delete in operations[i:i + batch]:
            revision += 1
            if delete:
                store.pop(key, None)
                changes.append((key, None))
            else:
                values = VALUES[key]
                entry = Entry(key, values[choice % len(values)], store[key].create_revision if key in store
                              else revision, revision)
                store[key] = entry
                changes.append((key, entry))
        change = live.apply(changes, revision)
        touched = {k.split("/")[1] for k, _ in changes
                   if k.split("/")[0] in ("topics", "partitions", "leaders", "acls")}
        assert change.topics == frozenset(touched)
        assert change.nodes == any(k.split("/")[0] in ("nodes", "members") for k, _ in changes)
    loaded = MetadataCache()
    loaded.reset(store.values(), revision)
    assert snapshot(live) == snapshot(loaded)
    assert live.revision == loaded.revision == revision
    again = loaded.reset(store.values(), revision)
    assert again == MetadataChange(), "a reload of the same keys changes nothing"


@given(ops)
def test_the_leaderless_count_is_the_partitions_shown_without_a_leader(operations):
    """The scrape's quick count agrees with ``partitions`` (what the API shows) in any state."""
    cache = MetadataCache()
    for revision, (key, choice, delete) in enumerate(operations, 1):
        values = VALUES[key]
        cache.apply([(key, None if delete else Entry(key, values[choice % len(values)], revision, revision))],
                    revision)
        shown = [state for t in cache.topics() for state in cache.partitions(t.name) or []]
        assert cache.leaderless_partitions() == sum(1 for state in shown if state.leader < 0)
def test_topic_exists_only_with_its_key_and_stale_partitions_are_ignored():
    cache = MetadataCache()
    cache.apply([("partitions/a/0", Entry("partitions/a/0", PartitionRecord("id2", (1,), (1,), 0).encode(), 1, 1))], 1)
    assert cache.topic("a") is None and cache.partitions("a") is None and cache.partition("a", 0) is None
    cache.apply([("topics/a", Entry("topics/a", topic("a", "id1", 1), 2, 2))], 2)
    assert cache.partition("a", 0) is None, "a record of another incarnation of the topic is stale"
    assert cache.partitions("a") == [PartitionState("a", 0, (), (), -1, 0)]
    record = PartitionRecord("id1", (1, 2), (1,), 4)
    cache.apply([("partitions/a/0", Entry("partitions/a/0", record.encode(), 1, 3))], 3)
    assert cache.partition("a", 0) == PartitionState("a", 0, (1, 2), (1,), -1, 4)
    cache.apply([("leaders/a/0", Entry("leaders/a/0", LeaderRecord(2, 4).encode(), 4, 4, lease=9))], 4)
    assert cache.partition("a", 0) == PartitionState("a", 0, (1, 2), (1,), 2, 4)
    assert cache.mod_revision(leader_key("a", 0)) == 4


def test_revision_never_goes_back_and_bad_values_are_skipped():
    cache = MetadataCache()
    cache.apply([("topics/x", Entry("topics/x", b"{", 5, 5))], 5)
    assert cache.topic("x") is None and cache.revision == 5
    cache.advance(3)
    assert cache.revision == 5
    cache.reset([], 4)
    assert cache.revision == 5


def test_a_partition_record_with_a_malformed_elr_reads_as_absent():
    cache = MetadataCache()
    good = PartitionRecord("id1", (1, 2), (1,), 2, (2,))
    cache.apply([("topics/x", Entry("topics/x", topic("x"), 1, 1)),
                 ("partitions/x/0", Entry("partitions/x/0", good.encode(), 1, 1))], 1)
    assert cache.partition_record("x", 0) == good
    for bad in ("x", "1,2", 7, {"a": 1}):  # an ELR that is not a list of node ids reads as absent, never raises
        value = encode({"topic_id": "id1", "replicas": [1, 2], "isr": [1], "leader_epoch": 3, "elr": bad})
        cache.apply([("partitions/x/0", Entry("partitions/x/0", value, 2, 2))], 2)
        assert cache.partition_record("x", 0) is None, bad
        cache.apply([("partitions/x/0", Entry("partitions/x/0", good.encode(), 3, 3))], 3)
        assert cache.partition_record("x", 0) == good


# Topic ids (Kafka names topics by id, decision 0398): each (name, version) has its own id.
ID_VALUES = {f"topics/{name}": [topic(name, f"{name}-id{v}") for v in range(3)] for name in ("a", "b")}


@given(st.lists(st.tuples(st.sampled_from(sorted(ID_VALUES)), st.integers(0, 2), st.booleans()), max_size=30))
def test_an_id_names_the_live_topic_that_has_it_and_nothing_else(operations):
    cache = MetadataCache()
    for revision, (key, choice, delete) in enumerate(operations, start=1):
        entry = None if delete else Entry(key, ID_VALUES[key][choice], revision, revision)
        cache.apply([(key, entry)], revision)
        for name in ("a", "b"):
            for v in range(3):
                topic_id = f"{name}-id{v}"
                live = [t for t in cache.topics() if t.topic_id == topic_id]
                assert cache.topic_by_id(topic_id) == (live[0] if live else None)
    assert cache.topic_by_id("") is None and cache.topic_by_id("no-such-id") is None


def test_a_topic_made_again_is_not_found_by_its_old_id():
    cache = MetadataCache()
    cache.apply([("topics/a", Entry("topics/a", topic("a", "old"), 1, 1))], 1)
    assert cache.topic_by_id("old") == cache.topic("a")
    cache.apply([("topics/a", None)], 2)
    assert cache.topic_by_id("old") is None
    cache.apply([("topics/a", Entry("topics/a", topic("a", "new"), 3, 3))], 3)
    assert cache.topic_by_id("old") is None
    assert cache.topic_by_id("new") == cache.topic("a")
    cache.apply([("topics/a", Entry("topics/a", topic("a", "newer"), 3, 4))], 4)  # replaced in one put
    assert cache.topic_by_id("new") is None and cache.topic_by_id("newer") == cache.topic("a")
    cache.reset([], 5)
    assert cache.topic_by_id("newer") is None
