"""Usage records in etcd (decision 0298): one record per node and hour, holding that node's whole
usage of the hour, under a prefix of their own beside the cluster's metadata (``usage_prefix``),
so they are neither watched nor cached. Each is sealed with the cluster's secret like the records
that grant access, so a write to etcd alone bills no one; a read leaves out records that do not
verify or parse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, final

from coordinator.errors import CoordinatorError
from coordinator.etcd_client import EtcdClient, op_delete_range, op_put
from coordinator.etcd_keys import parse_usage_key, usage_hour_bound, usage_key, usage_prefix
from coordinator.etcd_seal import RecordSeal

log = logging.getLogger(__name__)


@final
class EtcdUsage:
    def __init__(self, cluster: str, seal_secret: str | None, etcd: Callable[[], EtcdClient]) -> None:
        """``etcd``: the coordinator's client once started (it raises while there is none)."""
        self._prefix = usage_prefix(cluster)
        self._seal = RecordSeal(seal_secret, self._prefix)
        self._etcd = etcd

    async def put(self, hour_ms: int, node_id: int, rows: list[list[Any]]) -> None:
        relative = usage_key(hour_ms, node_id)
        await self._etcd().txn([], [op_put((self._prefix + relative).encode(),
                                           self._seal.seal(relative, {"rows": rows}))])

    async def between(self, from_hour_ms: int, to_ms: int) -> list[tuple[int, int, list[list[Any]]]]:
        first = self._prefix + usage_hour_bound(from_hour_ms)
        end = self._prefix + usage_hour_bound(max(from_hour_ms, to_ms))
        _, kvs = await self._etcd().range_between(first.encode(), end.encode())
        out = []
        for kv in kvs:
            relative = bytes(kv.key).decode()[len(self._prefix):]
            parsed = parse_usage_key(relative)
            if parsed is None or not from_hour_ms <= parsed[0] < to_ms:
                continue
            try:
                rows = self._seal.open(relative, bytes(kv.value))["rows"]
            except (CoordinatorError, ValueError, KeyError) as exc:
                log.warning("ignoring a usage record that does not verify or parse",
                            extra={"fields": {"key": relative, "error": str(exc)}})
                continue
            if isinstance(rows, list):
                out.append((parsed[0], parsed[1], rows))
        return out

    async def drop_before(self, hour_ms: int) -> None:
        start = (self._prefix + "usage/").encode()
        await self._etcd().txn([], [op_delete_range(start, (self._prefix + usage_hour_bound(hour_ms)).encode())])
