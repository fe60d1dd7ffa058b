"""A process for the compaction crash test: fills a compacted log, then compacts it and kills
itself with SIGKILL at the ``step``-th file operation of the pass (an fsync, rename, replace or
unlink of the swap protocol), before that operation runs.

Usage: python -m tests.segments.compaction_killer <partition_dir> <step>
"""

from __future__ import annotations

import os
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

import segments.cleaner_files as cleaner_files
from segments.cleaner import compact
from tests.segments.test_compaction_crash import _fill


def main() -> None:
    directory, step = sys.argv[1], int(sys.argv[2])
    log = _fill(directory)
    count = [0]

    def killing(call: Callable[..., Any]) -> Callable[..., Any]:
        def operation(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return call(*args, **kwargs)
        return operation

    fake_os = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
    for name in ("rename", "replace", "unlink"):
        setattr(fake_os, name, killing(getattr(os, name)))
    cleaner_files.os = fake_os  # type: ignore[assignment,attr-defined]
    compact(log, now_ms=10_000, fsync=killing(os.fsync))
    sys.stdout.write(f"done {count[0]}\n")


if __name__ == "__main__":
    main()
