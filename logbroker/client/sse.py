"""Server-Sent Events parsing (pure): lines in, events out, as the HTML standard's event-stream
format defines them (``event``, ``data`` (joined by newlines), ``id``; comments start with ``:``;
a blank line ends an event)."""

from __future__ import annotations

import dataclasses
from typing import Final

DATA_CHARS_MAX: Final = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    kind: str
    data: str
    id: str | None


class SseParser:
    def __init__(self) -> None:
        self._kind = ""
        self._data: list[str] = []
        self._size = 0
        self.last_id: str | None = None

    def feed(self, line: str) -> Event | None:
        """One line without its line ending; returns the event a blank line completes."""
        if not line:
            if not self._data:
                self._kind = ""
                return None
            event = Event(self._kind or "message", "\n".join(self._data), self.last_id)
            self._kind, self._data, self._size = "", [], 0
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._kind = value
        elif name == "data":
            self._size += len(value)
            if self._size > DATA_CHARS_MAX:
                raise ValueError(f"an event's data exceeds {DATA_CHARS_MAX} characters")
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None
