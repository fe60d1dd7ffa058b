"""Typed coordination errors; like the storage errors they carry a stable ``code`` and a
``retriable`` flag, so the HTTP and RPC layers map them by code in one table each."""

from __future__ import annotations


class CoordinatorError(Exception):
    code = "coordinator_error"
    retriable = False


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
