"""The window of record timestamps a topic accepts around the broker's clock (decision 0221).

Retention deletes a segment once its greatest timestamp is older than ``retention_ms``: one record
stamped far in the future (2^60 ms) keeps its segment, and every segment after it, for good. So a
produce whose records carry timestamps more than ``timestamp_after_max_ms`` after the broker's
clock (default one hour, as Kafka 4.0's ``message.timestamp.after.max.ms``), or more than
``timestamp_before_max_ms`` before it (default no bound, as Kafka's
``message.timestamp.before.max.ms``), is refused whole with 400 ``invalid_timestamp``; -1 is no
bound. Records produced without a timestamp take the broker's clock and always fit.

Pure: the topic's config and the clock are arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from coordinator.models import (
    TIMESTAMP_AFTER_KEY,
    TIMESTAMP_AFTER_MS_DEFAULT,
    TIMESTAMP_BEFORE_KEY,
    TIMESTAMP_BEFORE_MS_DEFAULT,
)
from logbroker.errors import InvalidTimestampError

NO_BOUND = -1


class TimestampWindow(NamedTuple):
    """How far (ms) a timestamp may lie after and before the broker's clock; -1: no bound."""

    after_max_ms: int
    before_max_ms: int

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> TimestampWindow:
        """A topic's window from its config (validated when the topic was created)."""
        return cls(_ms(config.get(TIMESTAMP_AFTER_KEY), TIMESTAMP_AFTER_MS_DEFAULT),
                   _ms(config.get(TIMESTAMP_BEFORE_KEY), TIMESTAMP_BEFORE_MS_DEFAULT))

    def check(self, low: int, high: int, now_ms: int) -> None:
        """Raise ``InvalidTimestampError`` unless timestamps ``low`` to ``high`` lie in the window."""
        if self.after_max_ms != NO_BOUND and high > now_ms + self.after_max_ms:
            raise InvalidTimestampError(
                f"a record's timestamp {high} is {high - now_ms} ms after the broker's clock; this topic accepts "
                f"at most {self.after_max_ms} ({TIMESTAMP_AFTER_KEY}); nothing was stored",
                timestamp=high, now_ms=now_ms, limit_ms=self.after_max_ms)
        if self.before_max_ms != NO_BOUND and low < now_ms - self.before_max_ms:
            raise InvalidTimestampError(
                f"a record's timestamp {low} is {now_ms - low} ms before the broker's clock; this topic accepts "
                f"at most {self.before_max_ms} ({TIMESTAMP_BEFORE_KEY}); nothing was stored",
                timestamp=low, now_ms=now_ms, limit_ms=self.before_max_ms)

    def check_all(self, timestamps: Iterable[int | None], now_ms: int) -> None:
        """``check`` over the given timestamps (None: the broker's clock, always in the window)."""
        given = [t for t in timestamps if t is not None]
        if given:
            self.check(min(given), max(given), now_ms)


def _ms(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
