"""Guarded writes to the etcd coordinator's key layout, shared by the modules that write it
(``etcd.py``: topics, leadership, sessions; ``etcd_accounts.py``: users, ACLs, groups).

Every write is a transaction whose outcome (either way) the node's cache has applied when it
returns, so this node reads its own writes; sealed kinds are sealed with the cluster's secret
(``etcd_seal``); a guard that keeps meeting concurrent changes ends, after ``CONTENTION_RETRIES``
rounds, as a retriable ``CoordinatorUnavailableError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, final

from coordinator.cache import MetadataCache
from coordinator.errors import CoordinatorUnavailableError, UnknownTopicError
from coordinator.etcd_client import EtcdClient
from coordinator.etcd_feed import MetadataFeed
from coordinator.etcd_keys import Key
from coordinator.etcd_seal import RecordSeal
from coordinator.models import TopicMetadata

CONTENTION_RETRIES: Final = 8
# etcd's default --max-txn-ops is 128; leave room for guards and the topic key.
TXN_OPS_MAX: Final = 120


@final
class GuardedWrites:
    def __init__(self, prefix: str, seal: RecordSeal, cache: MetadataCache, client: Callable[[], EtcdClient],
                 feed: Callable[[], MetadataFeed | None]) -> None:
        """``client``: the started etcd client (raises when there is none); ``feed``: the watch
        feed whose cache a write waits for (None before the start)."""
        self.prefix = prefix
        self.seal = seal
        self.cache = cache
        self._client = client
        self._feed = feed

    def key(self, key: Key) -> bytes:
        return (self.prefix + key.relative()).encode()

    def sealed(self, key: Key, value: Mapping[str, Any]) -> bytes:
        return self.seal.seal(key.relative(), value)

    async def txn(self, compare: Sequence[Any], success: Sequence[Any], failure: Sequence[Any] = ()) -> Any:
        resp = await self._client().txn(compare, success, failure)
        feed = self._feed()
        if feed is not None:
            await feed.visible(int(resp.header.revision))
        return resp

    def topic(self, name: str) -> TopicMetadata:
        meta = self.cache.topic(name)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return meta

    @staticmethod
    def contended(what: str) -> CoordinatorUnavailableError:
        return CoordinatorUnavailableError(f"{what}: the metadata changed concurrently {CONTENTION_RETRIES} "
                                           "times; retry")
