"""The client's cluster metadata (pure): bootstrap URLs, parsing of ``/v1/cluster`` and
``/v1/topics/{name}``, ages, and where a call goes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.client.metadata import (
    DOWN_S,
    FAILED_LOOKUP_AGE_S,
    NO_LEADER,
    SILENT_S,
    TOPICS_MAX,
    MetadataCache,
    Node,
    parse_bootstrap,
    parse_leaders,
    parse_nodes,
)

A, B, C = "http://a:1", "http://b:2", "https://c:3"


def test_bootstrap_accepts_one_url_a_comma_list_or_a_list():
    assert parse_bootstrap("http://a:1/") == (A,)
    assert parse_bootstrap(" http://a:1 , http://b:2/,") == (A, B)
    assert parse_bootstrap([A, "http://b:2,https://c:3", A]) == (A, B, C)


@pytest.mark.parametrize("bad", ["", " , ", [], "a:1", "ftp://a", "http://", "http://a b"])
def test_bootstrap_refuses_what_is_not_an_http_url(bad):
    with pytest.raises(ValueError):
        parse_bootstrap(bad)


def test_bootstrap_refuses_a_list_of_non_strings():
    with pytest.raises(TypeError):
        parse_bootstrap([1])  # type: ignore[list-item]


urls = st.builds(lambda scheme, host, port: f"{scheme}://{host}:{port}", st.sampled_from(["http", "https"]),
                 st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True), st.integers(1, 65535))


@given(st.lists(urls, min_size=1, max_size=8), st.booleans())
def test_bootstrap_keeps_order_and_drops_duplicates(given_urls, as_string):
    parsed = parse_bootstrap(",".join(given_urls) if as_string else given_urls)
    assert parsed == tuple(dict.fromkeys(given_urls))


def test_nodes_of_a_cluster_answer():
    body = {"cluster": "x", "node_id": 1, "nodes": [
        {"node_id": 1, "http_url": "http://a:1/", "alive": True},
        {"node_id": 2, "http_url": "", "alive": True},
        {"node_id": 3, "http_url": B, "alive": False},
        {"node_id": "4", "http_url": C},
        "junk", {"http_url": C}]}
    assert parse_nodes(body) == {1: Node(1, A, True), 2: Node(2, None, True), 3: Node(3, B, False)}


def test_leaders_of_a_topic_answer():
    body = {"partitions": [{"partition": 0, "leader": 2}, {"partition": 1, "leader": -1},
                           {"partition": 2}, {"partition": True, "leader": 1}, None]}
    assert parse_leaders(body) == {0: 2, 1: NO_LEADER}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["nodes", "partitions", "node_id", "http_url", "alive", "partition",
                                         "leader"]), inner, max_size=4), max_leaves=20))
def test_parsing_never_fails_on_any_json(body):
    nodes, leaders = parse_nodes(body), parse_leaders(body)
    assert all(isinstance(n, Node) and (n.http_url is None or n.http_url.startswith("http")) for n in nodes.values())
    assert all(isinstance(p, int) and isinstance(leader, int) for p, leader in leaders.items())


def cache_with(leaders: dict[int, int], nodes: dict[int, Node], now: float = 0.0) -> MetadataCache:
    cache = MetadataCache((A,), max_age_s=30)
    cache.set_nodes(nodes, now)
    cache.set_topic("t", leaders, now)
    return cache


def test_a_known_leader_is_routed_to():
    cache = cache_with({0: 2, 1: 3, 2: NO_LEADER, 3: 4, 4: 9}, {
        2: Node(2, B, True), 3: Node(3, C, False), 4: Node(4, None, True)})
    assert cache.leader_url("t", 0, 1.0) == B
    assert cache.leader_url("t", 1, 1.0) is None  # not alive
    assert cache.leader_url("t", 2, 1.0) is None  # no leader
    assert cache.leader_url("t", 3, 1.0) is None  # no URL published
    assert cache.leader_url("t", 4, 1.0) is None  # unknown node
    assert cache.leader_url("t", 5, 1.0) is None  # unknown partition
    assert cache.leader_url("other", 0, 1.0) is None
    assert cache.candidates(1.0, B) == [B, A]


def test_metadata_ages_and_invalidation():
    cache = cache_with({0: 2}, {2: Node(2, B, True)}, now=10.0)
    assert not cache.nodes_stale(39.9) and not cache.topic_stale("t", 39.9)
    assert cache.nodes_stale(40.0) and cache.topic_stale("t", 40.0)
    cache.invalidate("t")
    assert cache.nodes_stale(10.0) and cache.topic_stale("t", 10.0)
    cache.topic_failed("u", 10.0)
    assert not cache.topic_stale("u", 10.0) and cache.topic_stale("u", 10.0 + FAILED_LOOKUP_AGE_S)
    assert cache.leader_url("u", 0, 10.0) is None
    cache.nodes_failed(10.0)
    assert cache.nodes_stale(10.0 + FAILED_LOOKUP_AGE_S)


def test_a_node_that_failed_to_connect_is_tried_last_for_a_while():
    cache = MetadataCache((A, B), max_age_s=30)
    cache.set_nodes({1: Node(1, A, True), 2: Node(2, B, True), 3: Node(3, C, True), 4: Node(4, "http://d:4", False)},
                    0.0)
    cache.set_topic("t", {0: 1}, 0.0)
    assert cache.candidates(0.0) == [A, B, C]
    cache.mark_down(A, 1.0)
    cache.mark_down(C, 2.0)
    assert cache.leader_url("t", 0, 1.5) is None
    assert cache.candidates(2.0, cache.leader_url("t", 0, 2.0)) == [B, A, C]
    assert cache.candidates(1.5 + DOWN_S) == [A, B, C] and cache.is_down(C, 1.5 + DOWN_S)
    assert not cache.is_down(C, 2.0 + DOWN_S)
    cache.mark_down(B, 3.0)
    cache.mark_up(A)
    assert cache.candidates(3.0)[0] == A


def test_a_node_that_left_a_call_unanswered_is_asked_after_the_others_until_it_answers():
    cache = MetadataCache((A, B, C), max_age_s=30)
    cache.set_nodes({1: Node(1, A, True), 2: Node(2, B, True), 3: Node(3, C, True)}, 0.0)
    cache.set_topic("t", {0: 1}, 0.0)
    cache.mark_silent(A, 1.0)
    assert cache.candidates(1.0) == [B, C, A], "a metadata read asks the others first"
    assert cache.leader_url("t", 0, 1.0) == A, "still the leader the metadata names: a hedge compares with it"
    assert cache.candidates(1.0, A) == [A, B, C], "a call to a known leader still goes to it"
    cache.mark_down(C, 1.0)
    assert cache.candidates(1.0) == [B, A, C], "silent before down: it may only be slow"
    assert cache.candidates(1.0 + SILENT_S)[:2] == [A, B]
    cache.mark_silent(B, 2.0)
    cache.mark_up(B)
    assert cache.candidates(2.0)[0] == B
    cache.mark_silent(A, 3.0)
    cache.mark_answered(A)  # an error answer is an answer
    assert cache.candidates(3.0)[0] == A


def test_urls_learned_earlier_stay_a_last_resort():
    cache = MetadataCache((A,))
    cache.set_nodes({1: Node(1, B, True), 2: Node(2, C, True)}, 0.0)
    cache.set_nodes({1: Node(1, None, True), 2: Node(2, C, True), 3: Node(3, "http://d:4", True)}, 1.0)
    assert cache.candidates(1.0) == [A, C, "http://d:4", B]
    cache.mark_down(C, 1.0)
    assert cache.candidates(1.0) == [A, "http://d:4", B, C]
    cache.set_nodes({2: Node(2, C, False)}, 2.0)
    assert cache.candidates(2.0) == [A, "http://d:4", B]  # C's lease ended: not even a last resort


def test_topics_are_bounded():
    cache = MetadataCache((A,))
    for i in range(TOPICS_MAX + 10):
        cache.set_topic(f"t{i}", {0: 1}, 0.0)
    assert cache.topic_stale("t0", 0.0) and not cache.topic_stale(f"t{TOPICS_MAX + 9}", 0.0)
    assert sum(not cache.topic_stale(f"t{i}", 0.0) for i in range(TOPICS_MAX + 10)) == TOPICS_MAX


@given(st.lists(st.tuples(st.sampled_from([A, B, C, "http://d:4"]), st.floats(0, 100)), max_size=20),
       st.floats(0, 200), st.sampled_from([None, A, C]))
def test_candidates_always_offer_every_bootstrap_url_once(downs, now, first):
    cache = MetadataCache((A, B), max_age_s=30)
    cache.set_nodes({3: Node(3, C, True)}, 0.0)
    for url, when in downs:
        cache.mark_down(url, when)
    candidates = cache.candidates(now, first)
    assert len(candidates) == len(set(candidates)) and {A, B, C} <= set(candidates)
    up = [url for url in candidates if not cache.is_down(url, now)]
    assert candidates[:len(up)] == up  # reachable ones first
