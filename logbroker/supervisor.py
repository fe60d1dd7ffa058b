"""Background loops that never die silently: each round's failure is logged with its traceback,
counted, and followed by a retry after an exponential backoff (bounded by ``BACKOFF_MAX_S``);
a successful round resets the backoff. Only cancellation ends a supervised loop.

``backoff_s`` is pure; ``run_supervised`` takes its sleep as a parameter so tests drive it without
waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

log = logging.getLogger(__name__)
BACKOFF_MAX_S: Final = 30.0


def backoff_s(interval_s: float, failures: int, maximum_s: float = BACKOFF_MAX_S) -> float:
    """The pause before the next round: ``interval_s`` while rounds succeed, doubling with each
    failure in a row, never above ``maximum_s`` (nor below ``interval_s``)."""
    if failures <= 0:
        return interval_s
    return max(interval_s, min(maximum_s, interval_s * 2.0 ** min(failures, 32)))


async def run_supervised(name: str, round_: Callable[[], Awaitable[None]], interval_s: float, *,
                         on_failure: Callable[[str], None], backoff_max_s: float = BACKOFF_MAX_S,
                         sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Run ``round_`` every ``interval_s`` until cancelled."""
    failures = 0
    while True:
        await sleep(backoff_s(interval_s, failures, backoff_max_s))
        try:
            await round_()
        except asyncio.CancelledError:
            raise
        except Exception:
            failures += 1
            on_failure(name)
            retry_in_s = backoff_s(interval_s, failures, backoff_max_s)
            log.exception("background task failed; retrying", extra={"fields": {
                "task": name, "failures_in_a_row": failures, "retry_in_s": retry_in_s}})
        else:
            failures = 0
