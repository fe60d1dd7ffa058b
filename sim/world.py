"""The process-wide clocks and random ids, made the run's while it runs (a stop-gap).

The broker reads ``time.monotonic``, ``time.monotonic_ns``, ``time.time`` and ``time.time_ns``
directly in places where it takes no clock yet (the table in ``docs/design/simulation.md``), and
draws ids from ``uuid.uuid4`` and ``secrets.randbits``. For a node to run on virtual time they
must answer from the run: ``virtual_world(loop, rng)`` replaces them for the duration of a ``with``
block: monotonic time is the loop's, wall time is the loop's plus ``EPOCH_S``, and ids come from
the run's seeded generator. Everything is restored on exit, also on error.

A default argument such as ``clock=time.monotonic`` holds the real function from import time, so
replacing the module attribute does not reach it: the broker's functions and methods whose
defaults are one of the real clocks get the virtual one for the run too (``_swap_defaults``).
Once the broker takes its clocks as parameters (resolved at call time), this module goes.

With ``fsync`` given, ``os.fsync`` (and default arguments holding it, as ``write_atomic``'s) is that
function for the run: the simulated disk sees every fsync of the broker.

Not replaced: ``os.urandom`` (salts, nonces, keys: the simulated cluster runs without auth and
encryption at rest, so nothing it does draws on it).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import random
import secrets
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

from sim.loop import SimLoop

EPOCH_S: Final = 1_700_000_000.0  # the wall clock at virtual time 0 (November 2023)
BROKER_PACKAGES: Final = ("segments", "coordinator", "internal_rpc", "logbroker", "http_api", "grpc_api")


def _broker_functions() -> Iterator[Any]:
    """Every function and method defined in a loaded broker module (sorted: a stable order)."""
    for name in sorted(sys.modules):
        module = sys.modules[name]
        if module is None or name.split(".")[0] not in BROKER_PACKAGES or name.startswith("logbroker.client"):
            continue
        for _, value in sorted(vars(module).items()):
            if getattr(value, "__module__", None) != name:
                continue
            if inspect.isfunction(value):
                yield value
            elif inspect.isclass(value):
                for _, member in sorted(vars(value).items()):
                    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                    if inspect.isfunction(function):
                        yield function


def _swap_defaults(replace: dict[int, Callable[..., Any]]) -> list[tuple[Any, Any, Any]]:
    """Replace default arguments that are (by identity) keys of ``replace``; what to restore."""
    saved = []
    for function in _broker_functions():
        defaults, kwdefaults = function.__defaults__, function.__kwdefaults__
        new_defaults = tuple(replace.get(id(d), d) for d in defaults) if defaults else defaults
        new_kwdefaults = {k: replace.get(id(v), v) for k, v in kwdefaults.items()} if kwdefaults else kwdefaults
        if new_defaults != defaults or new_kwdefaults != kwdefaults:
            saved.append((function, defaults, kwdefaults))
            function.__defaults__, function.__kwdefaults__ = new_defaults, new_kwdefaults
    return saved


@contextlib.contextmanager
def virtual_world(loop: SimLoop, rng: random.Random, *,
                  fsync: Callable[[int], None] | None = None) -> Iterator[None]:
    real = (time.monotonic, time.monotonic_ns, time.time, time.time_ns, uuid.uuid4, secrets.randbits)
    real_fsync = os.fsync

    def monotonic_ns() -> int:
        return round(loop.time() * 1e9)

    def wall() -> float:
        return EPOCH_S + loop.time()

    def time_ns() -> int:
        return round((EPOCH_S + loop.time()) * 1e9)

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    def randbits(k: int) -> int:
        return rng.getrandbits(k)

    virtual: tuple[Callable[..., Any], ...] = (loop.time, monotonic_ns, wall, time_ns, uuid4, randbits)
    time.monotonic, time.monotonic_ns, time.time, time.time_ns, uuid.uuid4, secrets.randbits = virtual
    replace = {id(r): v for r, v in zip(real, virtual, strict=True)}
    if fsync is not None:
        os.fsync = fsync  # type: ignore[assignment]  # the broker passes descriptors as ints
        replace[id(real_fsync)] = fsync
    saved = _swap_defaults(replace)
    try:
        yield
    finally:
        for function, defaults, kwdefaults in saved:
            function.__defaults__, function.__kwdefaults__ = defaults, kwdefaults
        time.monotonic, time.monotonic_ns, time.time, time.time_ns, uuid.uuid4, secrets.randbits = real
        os.fsync = real_fsync
