"""Consumer groups as resources (decision 0170): who may join, see, grant and delete a group.

A group is claimed by the first user whose join gets past the topic checks; that user owns it
(``GroupRecord`` in the coordinator, next to topics and their ACLs). The rules are the topics'
(``permissions.allowed``) over one grantable permission, ``read`` (Kafka's group READ):

- ``read``: join, heartbeat, leave, commit, stream as a member, and a restricted describe;
- ``describe``: any grant (the group is listed and described, restricted to the caller's own
  members and to the offsets of topics the caller may read);
- ``manage``: owner and admins only: the full describe (every member and principal), the ACL,
  deleting the group.

A group nobody claimed (created while authentication was off, or before groups had owners) is
seen and managed by admins; the first user to join it claims it. With authentication off nothing
is checked and nothing is claimed.

The list comes a page at a time (``visible_page``). A user's page that stopped on a name they may
not see carries a sealed cursor (``~`` and the name, padded and encrypted with a key this process
drew at start), so paging never shows another user's group name; a sealed cursor from before a
restart is refused (400: list again from the start).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from coordinator.base import Coordinator
from coordinator.users import GROUP_PERMISSIONS, GroupRecord, validate_permissions, validate_user_name
from logbroker.auth.permissions import Principal, allowed
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.usage import check_group_limit
from logbroker.errors import ForbiddenError, InvalidRequestError

GroupAction = Literal["read", "describe", "manage"]
TopicReadable = Callable[[str], Awaitable[bool]]
NamesAfter = Callable[[str | None, int], tuple[list[str], bool]]
LIST_SCAN_NAMES_MAX: Final = 10_000  # group names one list call looks at, whatever it finds
LIST_SCAN_STEP: Final = 1_000
SEALED_PREFIX: Final = "~"  # never in a group name ([A-Za-z0-9._-])
SEALED_NAME_BYTES: Final = 256  # a name is padded to this length, so a cursor does not show it
SEALED_NONCE_BYTES: Final = 12
SEALED_CONTEXT: Final = b"logbroker group list cursor"


class GroupAccess:
    def __init__(self, coordinator: Coordinator, enabled: bool) -> None:
        self._coordinator = coordinator
        self.enabled = enabled
        self._cursor_key = AESGCM(AESGCM.generate_key(bit_length=256))

    async def authorize(self, principal: Principal, group: str, action: GroupAction) -> GroupRecord | None:
        """The group's record when ``principal`` may do ``action``, else ``ForbiddenError``. An
        unclaimed group passes for admins, and for ``read`` (a join claims it, see ``claim``;
        other member calls find no member). Others get 403 for it, as for a group they may not see."""
        if not self.enabled:
            return None
        record = await self._coordinator.get_group(group)
        if record is None:
            if principal.is_admin or action == "read":
                return None
            raise ForbiddenError(f"{principal.name!r} may not {action} group {group!r}")
        if not allowed(principal, action, record.owner, record.acl):
            raise ForbiddenError(f"{principal.name!r} may not {action} group {group!r}")
        return record

    async def claim(self, principal: Principal, group: str, limits: QuotaLimits | None = None) -> None:
        """Make ``principal`` the owner of ``group`` unless someone claimed it first; then they
        need ``read`` on it like anyone else (two first joins racing: one wins, one gets 403).
        A new group counts against ``limits.groups_max`` (429 past it; the coordinator keeps the
        count, never asked for an admin)."""
        if not self.enabled:
            return
        if limits is not None and not principal.is_admin and limits.groups_max > 0 \
                and await self._coordinator.get_group(group) is None:
            check_group_limit(principal, limits, await self._coordinator.count_groups_owned(principal.name))
        record = await self._coordinator.claim_group(group, principal.name)
        if not allowed(principal, "read", record.owner, record.acl):
            raise ForbiddenError(f"{principal.name!r} may not read group {group!r}")

    def is_manager(self, principal: Principal, record: GroupRecord | None) -> bool:
        return not self.enabled or principal.is_admin or (record is not None and record.owner == principal.name)

    async def visible_page(self, principal: Principal, names_after: NamesAfter, after: str | None,
                           limit: int) -> tuple[list[str], str | None]:
        """One page of the group names ``principal`` may describe, after ``after``, by name: at
        most ``limit`` of them, and the cursor to continue from (None: no more groups). Bounded
        work: it looks at no more than ``max(limit, LIST_SCAN_NAMES_MAX)`` names, so a caller who
        sees few of many groups may get a short (even empty) page with a cursor."""
        if not self.enabled or principal.is_admin:
            names, more = names_after(after, limit)
            return names, names[-1] if more and names else None
        found: list[str] = []
        budget, cursor = max(limit, LIST_SCAN_NAMES_MAX), after
        while budget > 0:
            names, more = names_after(cursor, min(budget, LIST_SCAN_STEP))
            budget -= len(names)
            for index, name in enumerate(names):
                record = await self._coordinator.get_group(name)
                if record is not None and allowed(principal, "describe", record.owner, record.acl):
                    found.append(name)
                    if len(found) == limit:
                        return found, name if more or index + 1 < len(names) else None
            if not more:
                return found, None
            cursor = names[-1]
        assert cursor is not None
        return found, self.seal(cursor)

    def seal(self, name: str) -> str:
        """A cursor for ``name`` that does not show it (nor its length)."""
        nonce = os.urandom(SEALED_NONCE_BYTES)
        sealed = self._cursor_key.encrypt(nonce, name.encode().ljust(SEALED_NAME_BYTES, b"\0"), SEALED_CONTEXT)
        return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def unseal(self, cursor: str) -> str:
        """The name in a cursor ``seal`` made (``InvalidRequestError`` for any other)."""
        try:
            body = cursor[len(SEALED_PREFIX):]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            name = self._cursor_key.decrypt(raw[:SEALED_NONCE_BYTES], raw[SEALED_NONCE_BYTES:], SEALED_CONTEXT)
            return name.rstrip(b"\0").decode()
        except (ValueError, binascii.Error, InvalidTag, UnicodeDecodeError) as exc:
            raise InvalidRequestError("the after cursor is not one this node gave, or the node restarted since: "
                                      "list again from the start") from exc

    async def set_acl(self, group: str, body: object) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) != {"user", "permissions"}:
            raise InvalidRequestError('the body must be {"user": name, "permissions": ["read"]}')
        user = validate_user_name(body["user"])
        permissions = validate_permissions(body["permissions"], GROUP_PERMISSIONS)
        return describe_acl(await self._coordinator.set_group_acl(group, user, permissions))

    async def describe_acl(self, group: str) -> dict[str, Any]:
        record = await self._coordinator.get_group(group)
        return describe_acl(record if record is not None else GroupRecord(group, None))

    async def forget(self, group: str) -> None:
        await self._coordinator.delete_group(group)


def describe_acl(record: GroupRecord) -> dict[str, Any]:
    return {"group": record.name, "owner": record.owner,
            "acl": [{"user": u, "permissions": sorted(p)} for u, p in sorted(record.acl.items())]}


async def restricted_view(view: dict[str, Any], principal: str, readable: TopicReadable) -> dict[str, Any]:
    """A group's describe as a grantee sees it: their own members (and their assignment), and
    committed offsets and lag of the topics they may read, without other members' ids."""
    mine = {m["member_id"] for m in view["members"] if m["principal"] == principal}
    topics = {o["topic"] for o in view["offsets"]}
    may_read = {t for t in sorted(topics) if await readable(t)}
    return {**view, "members": [m for m in view["members"] if m["member_id"] in mine],
            "assignment": {m: a for m, a in view["assignment"].items() if m in mine},
            "offsets": [{**o, "member_id": o["member_id"] if o["member_id"] in mine else None}
                        for o in view["offsets"] if o["topic"] in may_read]}

