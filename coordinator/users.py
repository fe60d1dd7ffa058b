"""Users and access-control values as the coordinator stores them (pure: no I/O).

A ``UserRecord`` holds the password only as a salted scrypt hash (``logbroker.auth.passwords``
writes and checks it; the coordinator never sees a plain password). An ACL maps user names to the
permissions granted on one topic; the topic's owner is in its ``TopicMetadata`` and needs no grant.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from coordinator.errors import InvalidUserError

Role = Literal["admin", "user"]
ROLES: Final = ("admin", "user")
Permission = Literal["read", "write"]
PERMISSIONS: Final = ("read", "write")
USER_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9._@-]{1,64}")
QUOTA_KEYS: Final = ("produce_bytes_per_s", "fetch_bytes_per_s", "connections_max", "topics_max",
                     "partitions_max", "streams_max", "long_polls_max", "groups_max", "group_members_max")
QUOTA_MAX: Final = 1 << 40
Acl = Mapping[str, frozenset[str]]


def validate_user_name(name: object) -> str:
    if not isinstance(name, str) or not USER_NAME_PATTERN.fullmatch(name) or name in (".", ".."):
        raise InvalidUserError(f"user names must match [A-Za-z0-9._@-]{{1,64}}: {name!r}")
    return name


def validate_role(role: object) -> Role:
    if role == "admin":
        return "admin"
    if role == "user":
        return "user"
    raise InvalidUserError(f"role must be admin or user, not {role!r}")


def validate_permissions(permissions: object) -> frozenset[str]:
    """A list of ``read``/``write`` (an empty list revokes every grant)."""
    if not isinstance(permissions, list) or not all(isinstance(p, str) for p in permissions):
        raise InvalidUserError("permissions must be a list of strings")
    unknown = set(permissions) - set(PERMISSIONS)
    if unknown:
        raise InvalidUserError(f"unknown permissions {sorted(unknown)}; expected read and/or write")
    return frozenset(permissions)


def validate_quotas(quotas: object) -> dict[str, int]:
    """Per-user overrides of the node's quotas; 0 means unlimited."""
    if not isinstance(quotas, dict):
        raise InvalidUserError("quotas must be an object")
    unknown = set(quotas) - set(QUOTA_KEYS)
    if unknown:
        raise InvalidUserError(f"unknown quota keys {sorted(unknown)}; expected {list(QUOTA_KEYS)}")
    for key, value in quotas.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= QUOTA_MAX:
            raise InvalidUserError(f"quota {key} must be an integer in [0, {QUOTA_MAX}], not {value!r}")
    return dict(quotas)


@dataclasses.dataclass(frozen=True, slots=True)
class UserRecord:
    name: str
    role: Role
    password_hash: str
    created_ms: int
    quotas: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "password_hash": self.password_hash,
                "created_ms": self.created_ms, "quotas": dict(self.quotas)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UserRecord:
        return cls(validate_user_name(raw["name"]), validate_role(raw["role"]), str(raw["password_hash"]),
                   int(raw["created_ms"]), validate_quotas(raw.get("quotas", {})))

    def public(self) -> dict[str, Any]:
        """What the API shows of a user: never the hash."""
        return {"name": self.name, "role": self.role, "created_ms": self.created_ms, "quotas": dict(self.quotas)}


def acl_to_json(acl: Acl) -> dict[str, list[str]]:
    return {user: sorted(perms) for user, perms in sorted(acl.items())}


def acl_from_json(raw: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    return {validate_user_name(user): validate_permissions(list(perms)) for user, perms in raw.items()}
