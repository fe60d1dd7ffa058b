"""Which user pays for a partition: a queue's state log is charged to the queue's owner, internal
and ownerless topics to no one; the costs of creating and growing agree with what is then held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.models import TopicMetadata
from logbroker.ownership import creation_cost, growth_cost, holdings, payer_by_topic
from logbroker.queues.manager import state_topic


def topic(name: str, partitions: int, owner: str | None, kind: str = "topic") -> TopicMetadata:
    return TopicMetadata(name, f"id-{name}", partitions, 1, kind, {}, owner, 0)  # type: ignore[arg-type]


def queue_with_state(name: str, partitions: int, owner: str) -> list[TopicMetadata]:
    queue = topic(name, partitions, owner, "queue")
    return [queue, topic(state_topic(queue), partitions, None), topic(f"{name}.dlq", 1, owner)]


def test_a_queue_costs_its_state_partitions_and_its_dead_letter_topic():
    topics = [*queue_with_state("q", 5, "ann"), topic("t", 3, "ann"), topic("b", 7, "bob"),
              topic("__consumer_offsets", 8, None), topic("open", 2, None)]
    assert holdings("ann", topics) == (3, 5 + 5 + 1 + 3)
    assert holdings("bob", topics) == (1, 7)
    payers = payer_by_topic(topics)
    assert payers[state_topic(topics[0])] == "ann" and "__consumer_offsets" not in payers and "open" not in payers


@given(st.lists(st.tuples(st.sampled_from(["topic", "queue"]), st.integers(1, 50)), max_size=20))
def test_what_creating_costs_is_what_is_then_held(specs):
    topics: list[TopicMetadata] = []
    expected = 0
    for n, (kind, partitions) in enumerate(specs):
        expected += creation_cost(kind, partitions, new_dead_letter=True)
        made = queue_with_state(f"q{n}", partitions, "ann") if kind == "queue" else [topic(f"t{n}", partitions, "ann")]
        topics += made
    assert holdings("ann", topics)[1] == expected


@given(st.sampled_from(["topic", "queue"]), st.integers(1, 50), st.integers(1, 50))
def test_what_growing_costs_is_what_is_then_held(kind, partitions, more):
    def made(count: int) -> list[TopicMetadata]:
        return queue_with_state("g", count, "ann") if kind == "queue" else [topic("g", count, "ann")]

    assert holdings("ann", made(partitions + more))[1] - holdings("ann", made(partitions))[1] == growth_cost(kind, more)
