"""What the client knows of the cluster, to route by (pure: no I/O, the clock is passed in).

The client reads ``GET /v1/cluster`` (node URLs and liveness) and ``GET /v1/topics/{name}`` (each
partition's leader) from any node and keeps them in a ``MetadataCache`` for a bounded age. A
partition-scoped call goes to its leader's ``http_url``; when the leader is unknown (``-1``, no
URL, not alive, or recently unreachable) it goes to any node, which forwards (DESIGN §4).

Invariants: every URL the cache hands out is an ``http(s)://`` URL without a trailing slash; the
bootstrap URLs are always candidates (so the client can start over from them when the nodes it
learned of are gone); the cache holds at most ``TOPICS_MAX`` topics, ``NODES_MAX`` nodes (and
learned URLs) and ``DOWN_MAX`` unreachable marks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

METADATA_MAX_AGE_S: Final = 60.0
# A node that forwarded a partition-scoped call names the leader in this header (``http_api``).
LEADER_HINT: Final = "X-LogBroker-Leader"
# A topic whose metadata could not be read (no such topic, not allowed, no node answered) is asked
# again after this long, not at every call: the call itself then gets the node's real answer.
FAILED_LOOKUP_AGE_S: Final = 1.0
# A node that refused a connection is tried last for this long.
DOWN_S: Final = 5.0
# A node that left a call unanswered for a producer's hedge period (paused, cut off, or only slow)
# is asked after the others for this long, or until it answers something.
SILENT_S: Final = 2.0
TOPICS_MAX: Final = 4096
NODES_MAX: Final = 1024
DOWN_MAX: Final = 2048
NO_LEADER: Final = -1


def parse_bootstrap(urls: str | Sequence[str]) -> tuple[str, ...]:
    """The bootstrap URLs of ``urls`` (one URL, a comma-separated string, or a list of either), in
    order, without duplicates or trailing slashes."""
    items = [urls] if isinstance(urls, str) else list(urls)
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"a bootstrap URL is a string, not {type(item).__name__}")
        for part in item.split(","):
            url = _normal_url(part)
            if url is None:
                if part.strip():
                    raise ValueError(f"not an http(s) URL: {part.strip()!r}")
                continue
            if url not in found:
                found.append(url)
    if not found:
        raise ValueError("at least one bootstrap URL is needed")
    return tuple(found)


def _normal_url(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    url = raw.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or any(c.isspace() for c in url):
        return None
    return url


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    http_url: str | None  # None: the node published no usable URL
    alive: bool
    rack: str | None = None


def parse_nodes(body: Any) -> dict[int, Node]:
    """The nodes of a ``/v1/cluster`` answer; entries that are not well-formed are left out."""
    nodes: dict[int, Node] = {}
    raw_nodes = body.get("nodes") if isinstance(body, dict) else None
    for raw in raw_nodes if isinstance(raw_nodes, list) else []:
        if not isinstance(raw, dict) or not _is_int(raw.get("node_id")):
            continue
        node_id = int(raw["node_id"])
        rack = raw.get("rack")
        nodes[node_id] = Node(node_id, _normal_url(raw.get("http_url")), raw.get("alive", True) is not False,
                              rack if isinstance(rack, str) and rack else None)
        if len(nodes) >= NODES_MAX:
            break
    return nodes


def parse_leaders(body: Any) -> dict[int, int]:
    """Partition number → leader node id (``NO_LEADER`` when none) of a ``/v1/topics/{name}``
    answer; entries that are not well-formed are left out."""
    leaders: dict[int, int] = {}
    raw_partitions = body.get("partitions") if isinstance(body, dict) else None
    for raw in raw_partitions if isinstance(raw_partitions, list) else []:
        if isinstance(raw, dict) and _is_int(raw.get("partition")) and _is_int(raw.get("leader")):
            leaders[int(raw["partition"])] = int(raw["leader"])
    return leaders


def parse_in_sync(body: Any) -> dict[int, tuple[int, ...]]:
    """Partition number → its in-sync replicas' node ids, from a ``/v1/topics/{name}`` answer."""
    in_sync: dict[int, tuple[int, ...]] = {}
    raw_partitions = body.get("partitions") if isinstance(body, dict) else None
    for raw in raw_partitions if isinstance(raw_partitions, list) else []:
        isr = raw.get("in_sync_replicas") if isinstance(raw, dict) else None
        if _is_int(raw.get("partition") if isinstance(raw, dict) else None) and isinstance(isr, list):
            in_sync[int(raw["partition"])] = tuple(int(n) for n in isr if _is_int(n))
    return in_sync


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True, slots=True)
class _Topic:
    leaders: Mapping[int, int]
    expires_at: float
    in_sync: Mapping[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)


class MetadataCache:
    """Nodes and partition leaders with an expiry each, and the URLs that recently failed to
    connect. ``now`` is a monotonic clock reading in seconds."""

    def __init__(self, bootstrap: Sequence[str], *, max_age_s: float = METADATA_MAX_AGE_S,
                 down_s: float = DOWN_S) -> None:
        if not bootstrap:
            raise ValueError("at least one bootstrap URL is needed")
        if max_age_s < 0 or down_s < 0:
            raise ValueError("ages are not negative")
        self.bootstrap = tuple(bootstrap)
        self.max_age_s, self.down_s = max_age_s, down_s
        self._nodes: dict[int, Node] = {}
        self._nodes_expire = float("-inf")
        self._topics: dict[str, _Topic] = {}
        self._down: dict[str, float] = {}  # URL -> when it last failed to connect
        self._silent: dict[str, float] = {}  # URL -> when a call to it was last seen unanswered too long
        # Every node URL ever learned, oldest first: a last resort when the latest answer lacks one
        # (a node that left, or answered before it published its URL).
        self._learned: dict[str, None] = {}

    # ---- what is known ---------------------------------------------------------------------

    def nodes_stale(self, now: float) -> bool:
        return now >= self._nodes_expire

    def topic_stale(self, topic: str, now: float) -> bool:
        entry = self._topics.get(topic)
        return entry is None or now >= entry.expires_at

    def set_nodes(self, nodes: Mapping[int, Node], now: float) -> None:
        self._nodes = dict(list(nodes.items())[:NODES_MAX])
        self._nodes_expire = now + self.max_age_s
        for node in self._nodes.values():
            if node.http_url is not None:
                self._learned.pop(node.http_url, None)
                self._learned[node.http_url] = None
        while len(self._learned) > NODES_MAX:
            del self._learned[next(iter(self._learned))]

    def nodes_failed(self, now: float) -> None:
        """No node answered ``/v1/cluster``: keep what is known, ask again a little later."""
        self._nodes_expire = now + min(self.max_age_s, FAILED_LOOKUP_AGE_S)

    def set_topic(self, topic: str, leaders: Mapping[int, int], now: float,
                  in_sync: Mapping[int, tuple[int, ...]] | None = None) -> None:
        self._put(topic, _Topic(dict(leaders), now + self.max_age_s, dict(in_sync or {})))

    def topic_failed(self, topic: str, now: float) -> None:
        """The topic's leaders could not be read: route to any node until a short age passes."""
        self._put(topic, _Topic({}, now + min(self.max_age_s, FAILED_LOOKUP_AGE_S)))

    def _put(self, topic: str, entry: _Topic) -> None:
        self._topics.pop(topic, None)
        if len(self._topics) >= TOPICS_MAX:
            del self._topics[next(iter(self._topics))]  # the oldest entry (dicts keep insertion order)
        self._topics[topic] = entry

    def invalidate(self, topic: str | None = None) -> None:
        """Forget the nodes (and ``topic``'s leaders): the next call reads them again."""
        self._nodes_expire = float("-inf")
        if topic is not None:
            self._topics.pop(topic, None)

    # ---- health ----------------------------------------------------------------------------

    def mark_down(self, url: str, now: float) -> None:
        self._down.pop(url, None)
        if len(self._down) >= DOWN_MAX:
            del self._down[next(iter(self._down))]
        self._down[url] = now

    def mark_up(self, url: str) -> None:
        self._down.pop(url, None)
        self._silent.pop(url, None)

    def mark_answered(self, url: str) -> None:
        """``url`` answered, even if with an error: not silent (still down if it refused a
        connection before)."""
        self._silent.pop(url, None)

    def mark_silent(self, url: str, now: float) -> None:
        """A call to ``url`` has gone unanswered for long: ask the other nodes first (metadata
        reads, calls without a leader) for ``SILENT_S`` from the last mark, or until it answers."""
        self._silent.pop(url, None)
        if len(self._silent) >= DOWN_MAX:
            del self._silent[next(iter(self._silent))]
        self._silent[url] = now

    def is_silent(self, url: str, now: float) -> bool:
        since = self._silent.get(url)
        return since is not None and now - since < SILENT_S

    def is_down(self, url: str, now: float) -> bool:
        failed = self._down.get(url)
        return failed is not None and now - failed < self.down_s

    # ---- routing ---------------------------------------------------------------------------

    def leader_url(self, topic: str, partition: int, now: float) -> str | None:
        """The URL of the partition's leader, or None when it is unknown or recently unreachable."""
        entry = self._topics.get(topic)
        leader = entry.leaders.get(partition, NO_LEADER) if entry is not None else NO_LEADER
        node = self._nodes.get(leader) if leader != NO_LEADER else None
        if node is None or node.http_url is None or not node.alive or self.is_down(node.http_url, now):
            return None
        return node.http_url

    def rack_url(self, topic: str, partition: int, rack: str, now: float) -> str | None:
        """The URL of an in-sync replica of the partition in ``rack`` (the leader when it is
        there, else the lowest id), for reading near the reader; None when there is none."""
        entry = self._topics.get(topic)
        if entry is None:
            return None
        leader = entry.leaders.get(partition, NO_LEADER)
        local = sorted(n for n in entry.in_sync.get(partition, ()) if (node := self._nodes.get(n)) is not None
                       and node.rack == rack and node.alive and node.http_url and not self.is_down(node.http_url, now))
        if not local:
            return None
        chosen = self._nodes[leader if leader in local else local[0]]
        return chosen.http_url

    def candidates(self, now: float, first: str | None = None) -> list[str]:
        """The URLs to try, best first: ``first`` (a leader), then the bootstrap URLs, the live
        nodes' URLs and the URLs learned earlier (but not of nodes now known dead); those that
        have not failed lately before those that have (the one that failed longest ago first),
        so that a call always has somewhere to go. Among the others than ``first``, those that
        left a call unanswered lately (``mark_silent``) come after the rest of the reachable ones:
        a call to a known leader still goes to it, a metadata read asks the others first."""
        dead = {n.http_url for n in self._nodes.values() if not n.alive}
        live = _unique([*([first] if first else []), *self.bootstrap,
                        *(n.http_url for n in self._nodes.values() if n.alive and n.http_url),
                        *(url for url in reversed(self._learned) if url not in dead)])
        up = [url for url in live if not self.is_down(url, now)]
        down = sorted((url for url in live if self.is_down(url, now)), key=lambda url: self._down[url])
        head = [first] if first is not None and up and up[0] == first else []
        rest = up[len(head):]
        return head + [url for url in rest if not self.is_silent(url, now)] + \
            [url for url in rest if self.is_silent(url, now)] + down


def _unique(urls: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(url for url in urls if url))
