"""The virtual world: while a run lasts, the process clocks and random ids are the run's, the
broker's default-argument clocks included; afterwards everything is as it was."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid

from logbroker.crash_watch import CrashWatch
from segments.cleaner import Throttle
from sim.loop import SimLoop, run
from sim.world import EPOCH_S, virtual_world


def test_clocks_ids_and_default_clocks_are_the_runs_and_are_restored():
    real = (time.monotonic, time.monotonic_ns, time.time, time.time_ns, uuid.uuid4, secrets.randbits)
    real_defaults = (CrashWatch.__init__.__kwdefaults__["clock"], Throttle.__init__.__kwdefaults__["clock"])
    assert real_defaults == (time.monotonic, time.monotonic)

    def once(seed: int) -> list[object]:
        loop = SimLoop()

        async def main() -> list[object]:
            await asyncio.sleep(12.5)
            now = loop.time()
            assert time.monotonic() == now and time.monotonic_ns() == round(now * 1e9)
            assert time.time() == EPOCH_S + now and time.time_ns() == round((EPOCH_S + now) * 1e9)
            assert CrashWatch.__init__.__kwdefaults__["clock"]() == now  # the default clock is the loop's
            assert Throttle.__init__.__kwdefaults__["clock"]() == now
            return [uuid.uuid4(), secrets.randbits(63)]

        with virtual_world(loop, random.Random(seed)):
            return run(main(), loop=loop)

    first = once(1)
    assert first == once(1) and first != once(2)
    assert (time.monotonic, time.monotonic_ns, time.time, time.time_ns, uuid.uuid4, secrets.randbits) == real
    assert (CrashWatch.__init__.__kwdefaults__["clock"], Throttle.__init__.__kwdefaults__["clock"]) == real_defaults
