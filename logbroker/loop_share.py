"""A long piece of work that runs on the event loop gives the loop back every ``SLICE_S``.

Replaying a queue's state log or ``__consumer_offsets`` when a node takes them up reads and
applies every record on the loop; done in one go it held the loop for 0.4 to 0.6 s in the chaos runs,
and every partition the node led waited meanwhile. Such work calls ``due()`` per step (it counts,
and reads the clock every ``CHECK_EVERY`` steps) and, when it says so, awaits ``take()``: one
turn of the loop for whatever else is ready. The work must keep what it builds unpublished until
it ends, since others run in between.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

SLICE_S: Final = 0.01
CHECK_EVERY: Final = 64


class LoopShare:
    def __init__(self, slice_s: float = SLICE_S, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self._slice_s = slice_s
        self._clock = clock
        self._until = clock() + slice_s
        self._steps = 0
        self.turns = 0

    def due(self) -> bool:
        """True when the work has used its slice: it should await ``take()`` now."""
        self._steps += 1
        if self._steps < CHECK_EVERY:
            return False
        self._steps = 0
        return self._clock() >= self._until

    async def take(self) -> None:
        await asyncio.sleep(0)
        self.turns += 1
        self._until = self._clock() + self._slice_s
