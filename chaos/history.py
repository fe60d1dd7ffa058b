"""The recorded operations of a chaos run: one dict per event, kept in memory (bounded) and written
as JSON lines.

Every event has ``f`` (what: ``produce``, ``read``, ``commit``, ``committed``, ``queue_send``,
``deliver``, ``queue_ack``, ``leader``, ``fault``), ``type`` (``invoke``, ``ok``, ``fail`` — a
refusal —, ``info`` — the outcome is unknown —, or ``start``/``end`` for a fault), ``process``
and ``time`` (seconds since the run began, monotonic). The other keys depend on ``f``; the checker
(``chaos.checker``) documents what it reads.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any, Final

EVENTS_MAX: Final = 5_000_000

Event = dict[str, Any]


class HistoryFullError(RuntimeError):
    """More than ``EVENTS_MAX`` events: the run is longer than the harness is sized for."""


class History:
    """Thread-safe, append-only; each event gets ``time`` when it is recorded unless given."""

    def __init__(self, *, events_max: int = EVENTS_MAX) -> None:
        self.started = time.monotonic()
        self.events: list[Event] = []
        self._events_max = events_max
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.started, 4)

    def add(self, f: str, type_: str, process: str, **fields: Any) -> Event:
        event: Event = {"f": f, "type": type_, "process": process, "time": fields.pop("time", None) or self.now(),
                        **fields}
        with self._lock:
            if len(self.events) >= self._events_max:
                raise HistoryFullError(f"more than {self._events_max} events")
            self.events.append(event)
        return event

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def write(self, out: IO[str]) -> None:
        for event in self.snapshot():
            out.write(json.dumps(event, separators=(",", ":")) + "\n")


def say(text: str) -> None:
    """A progress line on stderr (the run's phases and faults)."""
    print(f"chaos: {text}", file=sys.stderr, flush=True)


def read_jsonl(lines: Iterator[str] | IO[str]) -> list[Event]:
    return [json.loads(line) for line in lines if line.strip()]
