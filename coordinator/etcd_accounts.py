"""Users, topic ACLs and owners, and consumer group records in etcd (DESIGN §5): each change a
guarded transaction (``etcd_writes``) over records sealed with the cluster's secret, re-read and
retried when something else changed them meanwhile. A user's deletion rewrites what they own or
were granted in chunks within etcd's operation bound before the user key goes.
"""

from __future__ import annotations

import time
from typing import final

from coordinator.errors import (
    UnknownGroupRecordError,
    UnknownUserError,
    UserExistsError,
    UserOwnsTopicsError,
)
from coordinator.etcd_client import cmp_create, cmp_exists, cmp_mod, op_delete, op_put
from coordinator.etcd_keys import Key, acl_key, group_key, topic_key, user_key
from coordinator.etcd_writes import CONTENTION_RETRIES, TXN_OPS_MAX, GuardedWrites
from coordinator.models import TopicMetadata
from coordinator.users import Acl, GroupRecord, UserRecord, acl_to_json, group_without_user


@final
class EtcdAccounts:
    def __init__(self, writes: GuardedWrites) -> None:
        self._w = writes

    async def create_user(self, user: UserRecord) -> None:
        key = self._w.key(user_key(user.name))
        value = self._w.sealed(user_key(user.name), user.to_json())
        # A record there that does not verify reads as absent here, and may be replaced.
        resp = await self._w.txn([cmp_mod(key, self._w.cache.mod_revision(user_key(user.name)))
                                if self._w.cache.user(user.name) is None else cmp_create(key, 0)], [op_put(key, value)])
        if not resp.succeeded:
            raise UserExistsError(f"user {user.name!r} already exists")

    async def update_user(self, user: UserRecord) -> None:
        key = self._w.key(user_key(user.name))
        resp = await self._w.txn([cmp_exists(key)], [op_put(key, self._w.sealed(user_key(user.name), user.to_json()))])
        if not resp.succeeded:
            raise UnknownUserError(f"unknown user {user.name!r}")

    async def delete_user(self, name: str, *, reassign_to: str | None = None) -> list[str]:
        """Like the local coordinator's: the topics, grants and groups of ``name`` are rewritten
        in guarded chunks, then the user key is deleted (a chunk that meets a concurrent change is
        re-read and retried; what was already rewritten stays rewritten, as it should)."""
        moved: set[str] = set()
        for _ in range(CONTENTION_RETRIES):
            if self._w.cache.user(name) is None:
                raise UnknownUserError(f"unknown user {name!r}")
            owned = sorted(t.name for t in self._w.cache.topics() if t.owner == name)
            if owned and reassign_to is None:
                raise UserOwnsTopicsError(f"user {name!r} owns {len(owned)} topic(s) {owned[:20]}; "
                                          "reassign them (reassign_to) or delete them first", topics=owned)
            heir_exists = (reassign_to is not None and reassign_to != name
                           and self._w.cache.user(reassign_to) is not None)
            if owned and not heir_exists:
                raise UnknownUserError(f"cannot reassign topics to {reassign_to!r}: no such other user")
            heir = reassign_to if heir_exists else None
            writes: list[tuple[Key, bytes | None]] = []
            for topic in owned:
                meta = self._w.topic(topic)
                writes.append((topic_key(topic), self._w.sealed(topic_key(topic), TopicMetadata(
                    meta.name, meta.topic_id, meta.partitions, meta.replication_factor, meta.kind, meta.config,
                    heir, meta.created_ms).to_json())))
            for topic, acl in sorted(self._w.cache.acls().items()):
                if name in acl:
                    rest = {u: p for u, p in acl.items() if u != name}
                    writes.append((acl_key(topic), self._w.sealed(acl_key(topic), acl_to_json(rest)) if rest else None))
            for group in self._w.cache.groups():
                if group.owner == name or name in group.acl:
                    rest_group = group_without_user(group, name, heir)
                    writes.append((group_key(group.name), self._w.sealed(group_key(group.name), rest_group.to_json())))
            if await self._write_chunks(writes, heir):
                moved.update(owned)
                ukey = user_key(name)
                guards = [cmp_mod(self._w.key(ukey), self._w.cache.mod_revision(ukey))]
                resp = await self._w.txn(guards, [op_delete(self._w.key(ukey))])
                if resp.succeeded:
                    return sorted(moved)
        raise self._w.contended(f"deleting user {name!r}")

    async def _write_chunks(self, writes: list[tuple[Key, bytes | None]], heir: str | None) -> bool:
        """Put (or, for None, delete) each key if unchanged since read (and ``heir`` still
        exists), in chunks within etcd's operation bound; False at the first chunk that met a
        change."""
        for i in range(0, len(writes), TXN_OPS_MAX - 1):
            chunk = writes[i:i + TXN_OPS_MAX - 1]
            guards = [cmp_mod(self._w.key(k), self._w.cache.mod_revision(k)) for k, _ in chunk]
            if heir is not None:
                guards.append(cmp_exists(self._w.key(user_key(heir))))
            ops = [op_delete(self._w.key(k)) if v is None else op_put(self._w.key(k), v) for k, v in chunk]
            resp = await self._w.txn(guards, ops)
            if not resp.succeeded:
                return False
        return True

    async def set_acl(self, topic: str, user: str, permissions: frozenset[str]) -> Acl:
        for _ in range(CONTENTION_RETRIES):
            self._w.topic(topic)
            if self._w.cache.user(user) is None:
                raise UnknownUserError(f"unknown user {user!r}")
            acl = {u: p for u, p in self._w.cache.acl(topic).items() if u != user}
            if permissions:
                acl[user] = permissions
            akey = acl_key(topic)
            key = self._w.key(akey)
            op = op_put(key, self._w.sealed(akey, acl_to_json(acl))) if acl else op_delete(key)
            resp = await self._w.txn([cmp_exists(self._w.key(topic_key(topic))),
                                      cmp_exists(self._w.key(user_key(user))),
                                      cmp_mod(key, self._w.cache.mod_revision(akey))], [op])
            if resp.succeeded:
                return acl
        raise self._w.contended(f"setting the ACL of {topic!r}")

    async def set_owner(self, topic: str, owner: str) -> TopicMetadata:
        for _ in range(CONTENTION_RETRIES):
            meta = self._w.topic(topic)
            if self._w.cache.user(owner) is None:
                raise UnknownUserError(f"unknown user {owner!r}")
            owned = TopicMetadata(meta.name, meta.topic_id, meta.partitions, meta.replication_factor, meta.kind,
                                  meta.config, owner, meta.created_ms)
            tkey = topic_key(topic)
            resp = await self._w.txn([cmp_mod(self._w.key(tkey), self._w.cache.mod_revision(tkey)),
                                    cmp_exists(self._w.key(user_key(owner)))],
                                   [op_put(self._w.key(tkey), self._w.sealed(tkey, owned.to_json()))])
            if resp.succeeded:
                return owned
        raise self._w.contended(f"setting the owner of {topic!r}")

    async def claim_group(self, name: str, owner: str | None) -> GroupRecord:
        for _ in range(CONTENTION_RETRIES):
            found = self._w.cache.group(name)
            if found is not None:
                return found
            record = GroupRecord(name, owner, {}, time.time_ns() // 1_000_000)
            key = self._w.key(group_key(name))
            sealed = self._w.sealed(group_key(name), record.to_json())
            resp = await self._w.txn([cmp_create(key, 0)], [op_put(key, sealed)])
            if resp.succeeded:
                return record
        raise self._w.contended(f"claiming group {name!r}")

    async def set_group_acl(self, name: str, user: str, permissions: frozenset[str]) -> GroupRecord:
        for _ in range(CONTENTION_RETRIES):
            found = self._w.cache.group(name)
            if found is None:
                raise UnknownGroupRecordError(f"unknown group {name!r}")
            if self._w.cache.user(user) is None:
                raise UnknownUserError(f"unknown user {user!r}")
            acl = {u: p for u, p in found.acl.items() if u != user}
            if permissions:
                acl[user] = permissions
            record = GroupRecord(found.name, found.owner, acl, found.created_ms)
            gkey = group_key(name)
            resp = await self._w.txn([cmp_mod(self._w.key(gkey), self._w.cache.mod_revision(gkey)),
                                    cmp_exists(self._w.key(user_key(user)))],
                                   [op_put(self._w.key(gkey), self._w.sealed(gkey, record.to_json()))])
            if resp.succeeded:
                return record
        raise self._w.contended(f"setting the ACL of group {name!r}")

    async def delete_group(self, name: str) -> None:
        if self._w.cache.group(name) is not None:
            await self._w.txn([], [op_delete(self._w.key(group_key(name)))])
