"""What a workload of the cluster schedule (``sim.cluster_run``) needs of the schedule that runs it:
the seeded generator, the loop, the nodes and which are alive, the history and the trace, and a
bounded call run as code on one node (``("ok", answer)``, ``("fail", code)`` or ``("info", why)``)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from chaos.history import Event
from logbroker.node import Node

Method = Callable[..., Coroutine[Any, Any, Any]]


class Schedule(Protocol):
    rng: random.Random
    loop: asyncio.AbstractEventLoop

    def alive(self) -> list[int]: ...

    def nodes(self) -> dict[int, Node]: ...

    def record(self, f: str, type_: str, process: str, **fields: Any) -> Event: ...

    def event(self, text: str) -> None: ...

    def fail(self, invariant: str, detail: str) -> None: ...

    async def call(self, node_id: int, what: str, method: Method, *args: Any) -> tuple[str, Any]: ...
