"""Users and access-control values as the coordinator stores them (pure: no I/O).

A ``UserRecord`` holds the password only as a salted scrypt hash (``logbroker.auth.passwords``
writes and checks it; the coordinator never sees a plain password). An ACL maps user names to the
permissions granted on one topic; the topic's owner is in its ``TopicMetadata`` and needs no grant.
A ``GroupRecord`` is a consumer group as a resource (decision 0170): its owner (the first user
who joined it) and its ACL, whose only permission is ``read`` (Kafka's group READ).

A user also has an immutable ``user_id`` (a name deleted and created again is a new id) and a
``credential_version`` raised by a password change or an admin's revocation: tokens carry both,
and a token whose id or version is not the user's current one is refused (decision 0174). Users
stored before these fields get a stable default id on load, and it is saved with their next change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from coordinator.errors import InvalidUserError

Role = Literal["admin", "user"]
ROLES: Final = ("admin", "user")
PERMISSIONS: Final = ("read", "write")
GROUP_PERMISSIONS: Final = ("read",)
USER_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9._@-]{1,64}")
QUOTA_KEYS: Final = ("produce_bytes_per_s", "fetch_bytes_per_s", "connections_max", "topics_max",
                     "partitions_max", "streams_max", "long_polls_max", "groups_max", "group_members_max",
                     "storage_bytes_max")
QUOTA_MAX: Final = 1 << 53  # byte limits beyond a TiB, and still exact as a JSON number in a browser
LEGACY_ID_PREFIX: Final = "legacy-"
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


def validate_permissions(permissions: object, allowed: tuple[str, ...] = PERMISSIONS) -> frozenset[str]:
    """A list of ``read``/``write`` (of ``allowed``; an empty list revokes every grant)."""
    if not isinstance(permissions, list) or not all(isinstance(p, str) for p in permissions):
        raise InvalidUserError("permissions must be a list of strings")
    unknown = set(permissions) - set(allowed)
    if unknown:
        raise InvalidUserError(f"unknown permissions {sorted(unknown)}; expected {' and/or '.join(allowed)}")
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
    user_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    credential_version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "password_hash": self.password_hash,
                "created_ms": self.created_ms, "quotas": dict(self.quotas), "user_id": self.user_id,
                "credential_version": self.credential_version}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UserRecord:
        name, created_ms = validate_user_name(raw["name"]), int(raw["created_ms"])
        user_id = raw.get("user_id")
        return cls(name, validate_role(raw["role"]), str(raw["password_hash"]), created_ms,
                   validate_quotas(raw.get("quotas", {})),
                   str(user_id) if user_id is not None else legacy_user_id(name, created_ms),
                   int(raw.get("credential_version", 0)))

    def with_new_credentials(self, password_hash: str | None = None) -> UserRecord:
        """This user with the credential version raised (and, if given, a new password hash): every
        token issued before is refused from now on."""
        return dataclasses.replace(self, password_hash=password_hash or self.password_hash,
                                   credential_version=self.credential_version + 1)

    def public(self) -> dict[str, Any]:
        """What the API shows of a user: never the hash."""
        return {"name": self.name, "role": self.role, "created_ms": self.created_ms, "quotas": dict(self.quotas)}


def legacy_user_id(name: str, created_ms: int) -> str:
    """The id of a user stored before users had ids: stable across restarts (so it survives until
    the user's next change saves it), and different for a name deleted and created again."""
    return LEGACY_ID_PREFIX + hashlib.sha256(f"{name}\0{created_ms}".encode()).hexdigest()[:32]


def acl_to_json(acl: Acl) -> dict[str, list[str]]:
    return {user: sorted(perms) for user, perms in sorted(acl.items())}


def acl_from_json(raw: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    return {validate_user_name(user): validate_permissions(list(perms)) for user, perms in raw.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class GroupRecord:
    """A consumer group's owner and grants (``owner`` None: admins alone manage it)."""

    name: str
    owner: str | None
    acl: Acl = dataclasses.field(default_factory=dict)
    created_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"owner": self.owner, "acl": acl_to_json(self.acl), "created_ms": self.created_ms}

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> GroupRecord:
        owner = raw.get("owner")
        acl = {validate_user_name(u): validate_permissions(list(p), GROUP_PERMISSIONS)
               for u, p in raw.get("acl", {}).items()}
        return cls(name, None if owner is None else validate_user_name(owner), acl, int(raw.get("created_ms", 0)))


def group_without_user(group: GroupRecord, user: str, reassign_to: str | None) -> GroupRecord:
    """``group`` once ``user`` is deleted: their grant dropped, their ownership moved to
    ``reassign_to`` (None: the group is left to admins)."""
    owner = reassign_to if group.owner == user else group.owner
    return dataclasses.replace(group, owner=owner, acl={u: p for u, p in group.acl.items() if u != user})
