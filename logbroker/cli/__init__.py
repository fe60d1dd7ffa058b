"""The ``logbroker`` command (``logbroker.cli.command``)."""

from logbroker.cli.command import main

__all__ = ["main"]
