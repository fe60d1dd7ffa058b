"""The embedded coordinator of a single node: no etcd, state in ``<data_dir>/coordinator.json``.

Every partition lives on this node, which leads it with epoch 1. Changes are written atomically
(temp file, fsync, rename) before they are acknowledged, so a restart keeps every topic. One
``asyncio.Lock`` orders the changes; reads come from memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any, Final, final

from coordinator.base import Coordinator
from coordinator.errors import CoordinatorError, InvalidTopicError, TopicExistsError, UnknownTopicError
from coordinator.models import NodeInfo, PartitionState, TopicMetadata, TopicSpec
from segments.checkpoint import write_atomic

STATE_FILE: Final = "coordinator.json"
STATE_VERSION: Final = 1
STATE_BYTES_MAX: Final = 64 * 1024 * 1024
LEADER_EPOCH: Final = 1


@final
class LocalCoordinator(Coordinator):
    def __init__(self, data_dir: str, node: NodeInfo) -> None:
        self._path = os.path.join(data_dir, STATE_FILE)
        self._node = node
        self._topics: dict[str, TopicMetadata] = {}
        self._lock = asyncio.Lock()

    @property
    def node_id(self) -> int:
        return self._node.node_id

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        try:
            with open(self._path, "rb") as f:
                raw = f.read(STATE_BYTES_MAX + 1)
        except FileNotFoundError:
            return
        try:
            state = json.loads(raw)
            if state.get("version") != STATE_VERSION:
                raise ValueError(f"unsupported version {state.get('version')!r}")
            self._topics = {name: TopicMetadata.from_json(t) for name, t in state["topics"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise CoordinatorError(f"{self._path} is unreadable: {exc}") from exc

    async def close(self) -> None:
        return None

    def _save(self, topics: dict[str, TopicMetadata]) -> None:
        state: dict[str, Any] = {"version": STATE_VERSION, "topics": {n: t.to_json() for n, t in topics.items()}}
        write_atomic(self._path, json.dumps(state, indent=1, sort_keys=True).encode())

    async def create_topic(self, spec: TopicSpec, owner: str | None) -> TopicMetadata:
        replication = spec.replication_factor or 1
        if replication > 1:
            raise InvalidTopicError(f"replication factor {replication} exceeds the 1 node of this cluster")
        async with self._lock:
            if spec.name in self._topics:
                raise TopicExistsError(f"{spec.name!r} already exists")
            meta = TopicMetadata(spec.name, uuid.uuid4().hex, spec.partitions, replication, spec.kind,
                                 dict(spec.config), owner, time.time_ns() // 1_000_000)
            self._save({**self._topics, spec.name: meta})
            self._topics[spec.name] = meta
            return meta

    async def delete_topic(self, name: str) -> TopicMetadata:
        async with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(f"unknown topic {name!r}")
            self._save({n: t for n, t in self._topics.items() if n != name})
            del self._topics[name]
            return meta

    async def get_topic(self, name: str) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return meta

    async def list_topics(self) -> list[TopicMetadata]:
        return [self._topics[n] for n in sorted(self._topics)]

    async def partition_states(self, topic: str) -> list[PartitionState]:
        meta = await self.get_topic(topic)
        me = (self._node.node_id,)
        return [PartitionState(topic, p, me, me, self._node.node_id, LEADER_EPOCH) for p in range(meta.partitions)]

    async def nodes(self) -> list[NodeInfo]:
        return [self._node]
