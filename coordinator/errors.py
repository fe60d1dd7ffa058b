"""Typed coordination errors; like the storage errors they carry a stable ``code`` and a
``retriable`` flag, so the HTTP and RPC layers map them by code in one table each."""

from __future__ import annotations

from typing import Any


class CoordinatorError(Exception):
    code = "coordinator_error"
    retriable = False

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class InvalidTopicError(CoordinatorError):
    """A topic name, partition count, replication factor, kind or config is not acceptable."""

    code = "invalid_topic"


class TopicExistsError(CoordinatorError):
    code = "topic_exists"


class UnknownTopicError(CoordinatorError):
    code = "unknown_topic"


class CoordinatorUnavailableError(CoordinatorError):
    code = "coordinator_unavailable"
    retriable = True


class StaleEpochError(CoordinatorError):
    """A leader's guarded change (ISR, hand-back) met a newer epoch: it leads no longer."""

    code = "not_leader"
    retriable = True


class UserExistsError(CoordinatorError):
    code = "user_exists"


class UnknownUserError(CoordinatorError):
    code = "unknown_user"


class InvalidUserError(CoordinatorError):
    """A user name, role, password or ACL entry is not acceptable."""

    code = "invalid_user"


class UserOwnsTopicsError(CoordinatorError):
    """A user cannot be deleted while topics would be left without their owner."""

    code = "user_owns_topics"


class UnknownGroupRecordError(CoordinatorError):
    """No one owns the consumer group (it was never joined with authentication on)."""

    code = "unknown_group"
