"""Who may do what to a topic or queue (pure: no I/O).

Rules, in order: an admin may do anything; the owner (the user who created the topic) may do
anything to it; anyone else needs a grant in the topic's ACL: ``read`` to fetch, consume as a
group member or receive from a queue (and to describe), ``write`` to produce or send. Deleting a
topic and changing its ACL (``manage``) are for the owner and admins only, never grantable.
A topic without an owner (created while authentication was off) is managed by admins alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final, Literal

from coordinator.users import Role

Action = Literal["read", "write", "manage", "describe"]
ACTIONS: Final = ("read", "write", "manage", "describe")


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a request: a user and their current role."""

    name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


ANONYMOUS_ADMIN: Final = Principal("anonymous", "admin")
"""The caller of every request on a node whose authentication is off (development only)."""


def allowed(principal: Principal, action: Action, owner: str | None, acl: Mapping[str, frozenset[str]]) -> bool:
    if principal.is_admin or (owner is not None and owner == principal.name):
        return True
    granted = acl.get(principal.name, frozenset())
    if action == "describe":
        return bool(granted)
    if action == "manage":
        return False
    return action in granted
