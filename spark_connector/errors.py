"""Errors of the Spark connector. Spark wraps them in its own exceptions; their messages say what
went wrong and what to change, so the wrapped text is still the useful part."""

from __future__ import annotations


class ConnectorError(Exception):
    """Base class of every error this package raises on purpose."""


class OptionError(ConnectorError, ValueError):
    """A bad, missing or unknown option (raised on the driver, before any task runs)."""


class TopicNotFoundError(ConnectorError):
    """The topic is not in the given data directories, or the node does not know it."""


class DataLossError(ConnectorError):
    """Records that should be read are gone (retention deleted them first); see failOnDataLoss."""


class ReadError(ConnectorError):
    """A read could not complete: the data on disk or the node's answer does not add up."""


class WriteError(ConnectorError):
    """The node refused or failed a produce request (after the bounded retries)."""


class WorkerEnvironmentError(ConnectorError):
    """Spark's Python workers cannot run this connector (no pyarrow, or not this package)."""
