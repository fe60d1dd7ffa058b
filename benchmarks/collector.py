"""The harness's own garbage collector kept out of the latencies it measures.

A latency run's sender and receiver are Python processes: a full collection in either (75 ms
and more in the harness process, which holds every result so far) would be charged to whichever
system is being measured at that moment, a pause of the harness and not of the broker. While a
latency point is timed, both processes run with what exists frozen and the collector off;
garbage is collected between points. The same holds for every system measured.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Collect now, freeze what survives, and keep the collector off until the block ends."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
