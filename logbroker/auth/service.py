"""The node's authentication and authorization: users, logins, token checks, topic permissions,
quotas and connection limits, composed over the ``Coordinator`` (which stores users and ACLs).

With authentication off (development only) every caller is ``ANONYMOUS_ADMIN`` and nothing is
checked. With it on, a request's bearer token is verified (cached, see ``tokens``) and its
subject must still be a stored user with the token's user id and credential version, whose current
role applies (so deleting, recreating or demoting a user, a password change and an admin's
revocation take effect at once, not when their tokens expire; decision 0174). All of it is read
from the coordinator's memory: no disk I/O per request. Password hashing runs in a small thread pool
off the event loop, in lanes (``hashing``): logins not from a trusted (user, address) pair use at
most one of its threads and are throttled (``login_throttle``); users changing their own password
use at most one, must send their current password and are budgeted (``password_changes``), so
neither kind of flood delays other people's logins.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Final

from coordinator.base import Coordinator
from coordinator.errors import UnknownTopicError, UnknownUserError
from coordinator.models import TopicMetadata
from coordinator.users import (
    LEGACY_ID_PREFIX,
    UserRecord,
    validate_permissions,
    validate_quotas,
    validate_role,
    validate_user_name,
)
from logbroker.auth.hashing import HashLanes, Lane
from logbroker.auth.login_throttle import LoginThrottle
from logbroker.auth.password_changes import PasswordChanges
from logbroker.auth.passwords import DUMMY_HASH, check_password, hash_password, validate_password
from logbroker.auth.permissions import ANONYMOUS_ADMIN, Action, Principal, allowed
from logbroker.auth.quotas import ConnectionCounter, QuotaKind, QuotaLimits, Quotas
from logbroker.auth.tokens import TokenClaims, Tokens
from logbroker.auth.usage import Usage
from logbroker.errors import (
    AuthenticationError,
    ForbiddenError,
    InvalidRequestError,
    NotAvailableError,
    TooManyRequestsError,
)
from logbroker.metering.meter import Meter

log = logging.getLogger(__name__)
LOGIN_RETRY_AFTER_S: Final = 1.0
BEARER: Final = "bearer "
PASSWORD_BODY_FIELDS: Final = frozenset({"password", "current_password"})
SENT_PASSWORD_CHARS_MAX: Final = 4096  # longer is refused before hashing (stored ones are shorter still)


class AuthService:
    def __init__(self, coordinator: Coordinator, make_tokens: Callable[[], Tokens] | None, limits: QuotaLimits, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``make_tokens`` None means authentication is off; it is called (keys are read) in ``start``."""
        self.coordinator = coordinator
        self._make_tokens = make_tokens
        self.tokens: Tokens | None = None
        self.limits = limits
        self.quotas = Quotas(clock)
        self.meter = Meter(self.quotas)  # charges quotas and counts usage: the one place for both
        self.connections = ConnectionCounter()
        self.usage = Usage()
        self.hashing = HashLanes()
        self.login_throttle = LoginThrottle(clock)
        self.password_changes = PasswordChanges(clock)

    @property
    def enabled(self) -> bool:
        return self._make_tokens is not None

    def start(self) -> None:
        if self._make_tokens is not None and self.tokens is None:
            self.tokens = self._make_tokens()

    def _started_tokens(self) -> Tokens:
        if self.tokens is None:
            raise NotAvailableError("authentication is not ready yet")
        return self.tokens

    def close(self) -> None:
        self.hashing.close()

    # ---- users ---------------------------------------------------------------------------------

    async def bootstrap_admin(self, name: str, password: str) -> bool:
        """Create the first admin from configuration when no user of that name exists yet."""
        if await self.coordinator.find_user(validate_user_name(name)) is not None:
            return False
        await self.create_user({"username": name, "password": password, "role": "admin"})
        log.info("created the configured admin user", extra={"fields": {"user": name}})
        return True

    async def create_user(self, body: object) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise InvalidRequestError("the request body must be a JSON object")
        unknown = set(body) - {"username", "password", "role", "quotas"}
        if unknown:
            raise InvalidRequestError(f"unknown fields: {sorted(unknown)}")
        name = validate_user_name(body.get("username"))
        role = validate_role(body.get("role", "user"))
        password = validate_password(body.get("password"))
        quotas = validate_quotas(body.get("quotas", {}))
        password_hash = await self.hashing.run("trusted", hash_password, password)
        user = UserRecord(name, role, password_hash, time.time_ns() // 1_000_000, quotas)
        await self.coordinator.create_user(user)
        return user.public()

    async def user(self, name: str) -> UserRecord:
        user = await self.coordinator.find_user(validate_user_name(name))
        if user is None:
            raise UnknownUserError(f"unknown user {name!r}")
        return user

    async def change_password(self, caller: Principal, name: str, body: object) -> None:
        """Set ``name``'s password from ``body``. A user changing their own (an admin too) must send
        the current one (``current_password``; a token alone is not enough: 403 when wrong) and is
        budgeted (``password_changes``); an admin resetting someone else's needs neither."""
        if not isinstance(body, dict):
            raise InvalidRequestError("the request body must be a JSON object")
        unknown = set(body) - PASSWORD_BODY_FIELDS
        if unknown:
            raise InvalidRequestError(f"unknown fields: {sorted(unknown)}")
        password = validate_password(body.get("password"))
        user = await self.user(name)
        own = self.enabled and user.name == caller.name
        lane: Lane = "own" if own else "trusted"
        if own:
            current = body.get("current_password")
            if not isinstance(current, str) or len(current) > SENT_PASSWORD_CHARS_MAX:
                raise InvalidRequestError("changing your own password needs current_password (a string)")
            self.password_changes.take(user.name)
            if not await self.hashing.run(lane, check_password, current, user.password_hash):
                raise ForbiddenError("current_password is not the user's current password")
        password_hash = await self.hashing.run(lane, hash_password, password)
        latest = await self.user(name)  # as it is now: an admin may have revoked its tokens meanwhile
        if latest.user_id != user.user_id:
            raise UnknownUserError(f"the user {name!r} was deleted meanwhile")
        await self.coordinator.update_user(latest.with_new_credentials(password_hash))

    async def revoke_tokens(self, name: str) -> dict[str, Any]:
        """Refuse every token issued to ``name`` so far (their next request gets 401)."""
        user = (await self.user(name)).with_new_credentials()
        await self.coordinator.update_user(user)
        return {"user": user.name, "credential_version": user.credential_version}

    async def set_quotas(self, name: str, quotas: object) -> dict[str, Any]:
        user = await self.user(name)
        updated = dataclasses.replace(user, quotas=validate_quotas(quotas))
        await self.coordinator.update_user(updated)
        return updated.public()

    async def delete_user(self, caller: Principal, name: str, reassign_to: str | None) -> list[str]:
        user = await self.user(name)
        if user.name == caller.name:
            raise ForbiddenError("an admin cannot delete their own user")
        if reassign_to is not None:
            validate_user_name(reassign_to)
        return await self.coordinator.delete_user(user.name, reassign_to=reassign_to)

    async def login(self, body: object, address: str = "") -> dict[str, Any]:
        """A token for a right username and password sent from ``address``; failed attempts are
        throttled per username, address and pair (``login_throttle``) before any hashing."""
        if not isinstance(body, dict):
            raise InvalidRequestError("the request body must be a JSON object")
        if not self.enabled:
            raise InvalidRequestError("authentication is off on this node: no token is needed")
        tokens = self._started_tokens()
        name, password = body.get("username"), body.get("password")
        if not isinstance(name, str) or not isinstance(password, str) or len(password) > SENT_PASSWORD_CHARS_MAX:
            raise InvalidRequestError("username and password must be strings")
        user = await self._checked_user(name, password, address)
        token, expires_in = tokens.issue(user.name, (user.role,), user_id=user.user_id,
                                         credential_version=user.credential_version)
        return {"access_token": token, "token_type": "bearer", "expires_in": expires_in}

    async def authenticate_password(self, name: str, password: str, address: str = "") -> tuple[Principal, QuotaLimits]:
        """The caller who proved ``name`` with ``password`` (a protocol's own login, such as Kafka's
        SASL PLAIN), throttled as ``login`` is, and the quota limits that apply to them."""
        if not self.enabled:
            return ANONYMOUS_ADMIN, QuotaLimits()
        if len(password) > SENT_PASSWORD_CHARS_MAX:
            raise AuthenticationError("invalid username or password")
        user = await self._checked_user(name, password, address)
        limits = self.limits.override(user.quotas) if user.quotas else self.limits
        return Principal(user.name, user.role), limits

    async def _checked_user(self, name: str, password: str, address: str) -> UserRecord:
        """The user ``name`` when ``password`` is theirs, else ``AuthenticationError``; failed
        attempts are throttled per username, address and pair before any hashing."""
        trusted = self.login_throttle.begin(name[:64], address)
        ok: bool | None = None
        try:
            user = await self.coordinator.find_user(name) if len(name) <= 64 else None
            lane: Lane = "trusted" if trusted else "untrusted"
            stored = user.password_hash if user else DUMMY_HASH
            matched = await self.hashing.run(lane, check_password, password, stored)
            ok = bool(matched) and user is not None
        finally:
            self.login_throttle.end(name[:64], address, trusted, ok)
        if user is None or not ok:
            raise AuthenticationError("invalid username or password")
        return user

    # ---- requests ------------------------------------------------------------------------------

    async def authenticate(self, authorization: str | None) -> tuple[Principal, QuotaLimits]:
        """The caller of a request, from its ``Authorization`` header, and the quota limits that
        apply to them (the user is looked up once for both)."""
        if not self.enabled:
            return ANONYMOUS_ADMIN, QuotaLimits()
        tokens = self._started_tokens()
        if not authorization:
            raise AuthenticationError("this call needs a bearer token (POST /v1/auth/token)")
        if authorization[:len(BEARER)].lower() != BEARER:
            raise AuthenticationError("the Authorization header must be 'Bearer <token>'")
        user = await self.current_user(tokens.verify(authorization[len(BEARER):].strip()))
        limits = self.limits.override(user.quotas) if user.quotas else self.limits
        return Principal(user.name, user.role), limits

    def token_expires_at(self, token: str) -> int:
        """When ``token`` expires (seconds since the epoch); ``AuthenticationError`` for a token
        that is not valid now. For a protocol whose sessions outlive a request (Kafka's)."""
        return self._started_tokens().verify(token).expires_at

    async def current_user(self, claims: TokenClaims) -> UserRecord:
        """The stored user ``claims`` were issued to, if they still stand, else ``AuthenticationError``."""
        user = await self.coordinator.find_user(claims.subject)
        if user is None:
            raise AuthenticationError(f"the token's user {claims.subject!r} no longer exists")
        if claims.user_id is None and _legacy_token_of(user, claims):
            return user
        if claims.user_id != user.user_id:
            raise AuthenticationError(f"the token was issued to an earlier user named {claims.subject!r} (or "
                                      "before users had ids): log in again")
        if claims.credential_version != user.credential_version:
            raise AuthenticationError(f"the token was revoked (the password of {claims.subject!r} changed or an "
                                      "admin revoked their tokens): log in again")
        return user

    async def authorize_topic(self, principal: Principal, topic: str, action: Action) -> TopicMetadata:
        """The topic's metadata when ``principal`` may do ``action`` to it, else ``ForbiddenError``.
        An unknown topic is 404 only to callers who could see it if it existed (admins); others get
        403 as well, so names cannot be probed."""
        try:
            meta = await self.coordinator.get_topic(topic)
        except UnknownTopicError:
            if principal.is_admin:
                raise
            raise ForbiddenError(f"{principal.name!r} may not {action} {topic!r}") from None
        if principal.is_admin or meta.owner == principal.name:
            return meta
        acl = await self.coordinator.get_acl(topic)
        if not allowed(principal, action, meta.owner, acl):
            raise ForbiddenError(f"{principal.name!r} may not {action} {topic!r}")
        return meta

    async def authorize_owner(self, owner: str | None, topic: str, action: Action) -> TopicMetadata:
        """``authorize_topic`` for the owner of a resource rather than the caller of a request (a
        queue's owner on its dead-letter topic): their current role and grants. A resource without
        an owner (made while authentication was off) acts for admins."""
        if not self.enabled or owner is None:
            return await self.coordinator.get_topic(topic)
        user = await self.coordinator.find_user(owner)
        if user is None:
            raise ForbiddenError(f"the owner {owner!r} no longer exists")
        return await self.authorize_topic(Principal(user.name, user.role), topic, action)

    async def visible(self, principal: Principal, topics: list[TopicMetadata]) -> list[TopicMetadata]:
        """The topics ``principal`` may describe."""
        if principal.is_admin:
            return topics
        out = []
        for meta in topics:
            if meta.owner == principal.name or allowed(principal, "describe", meta.owner,
                                                       await self.coordinator.get_acl(meta.name)):
                out.append(meta)
        return out

    async def set_acl(self, topic: str, body: object) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) - {"user", "permissions"}:
            raise InvalidRequestError("the body must be {\"user\": name, \"permissions\": [\"read\", \"write\"]}")
        user = validate_user_name(body.get("user"))
        permissions = validate_permissions(body.get("permissions"))
        await self.coordinator.set_acl(topic, user, permissions)
        return await self.describe_acl(topic)

    async def describe_acl(self, topic: str) -> dict[str, Any]:
        meta = await self.coordinator.get_topic(topic)
        acl = await self.coordinator.get_acl(topic)
        return {"topic": topic, "owner": meta.owner,
                "acl": [{"user": u, "permissions": sorted(p)} for u, p in sorted(acl.items())]}

    async def topics_of(self, name: str) -> dict[str, Any]:
        """What ``name`` owns, and the grants they hold on other topics."""
        await self.user(name)
        owned, grants = [], []
        for meta in await self.coordinator.list_topics():
            if meta.owner == name:
                owned.append(meta.name)
                continue
            granted = (await self.coordinator.get_acl(meta.name)).get(name)
            if granted:
                grants.append({"topic": meta.name, "permissions": sorted(granted)})
        return {"user": name, "topics": owned, "grants": grants}

    # ---- quotas --------------------------------------------------------------------------------

    def check_quota(self, principal: Principal, kind: QuotaKind, limits: QuotaLimits) -> None:
        delay = self.quotas.delay_s(principal.name, kind, limits)
        if delay > 0:
            raise TooManyRequestsError(f"{principal.name!r} is over their {kind} quota of "
                                       f"{limits.rate(kind)} bytes/s", retry_after_s=math.ceil(delay * 1000) / 1000)

    def admit_connection(self, principal: Principal, connection: Any, limits: QuotaLimits) -> None:
        if not self.connections.admit(principal.name, connection, limits.connections_max):
            raise TooManyRequestsError(f"{principal.name!r} already has {limits.connections_max} connections open",
                                       retry_after_s=LOGIN_RETRY_AFTER_S)


def _legacy_token_of(user: UserRecord, claims: TokenClaims) -> bool:
    """A token issued before tokens carried ids stands, through an upgrade, for a user stored before
    users had ids whose credentials have not changed since, if it was not issued before that user
    was created (so not to an earlier user of the name). It expires within ``token_ttl_s``."""
    return user.user_id.startswith(LEGACY_ID_PREFIX) and user.credential_version == 0 \
        and claims.credential_version is None and claims.issued_at >= user.created_ms // 1000
