"""Progress while a run goes: a rich progress bar on a terminal when rich is installed (the
``bench`` extra); plain timestamped lines on stderr otherwise (logs, CI, the harness's own tests,
which need nothing beyond the test extra)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


class Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self._rich: Any = None
        self._task: Any = None
        self._started = time.monotonic()

    def __enter__(self) -> Progress:
        if not sys.stderr.isatty():
            return self
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
        except ImportError:
            return self
        self._rich = RichProgress(TextColumn("{task.description:<48}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), transient=False, console=Console(stderr=True))
        self._rich.__enter__()
        self._task = self._rich.add_task("starting", total=self.total)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._rich is not None:
            self._rich.__exit__(exc_type, exc, tb)

    def advance(self, description: str) -> None:
        """Mark the step that is starting now (the previous one is done)."""
        if self.done < self.total:
            self.done += 1
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done - 1, description=description)
        else:
            print(f"[{time.monotonic() - self._started:6.1f} s] ({self.done}/{self.total}) {description}",
                  file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=self.total, description="done")
