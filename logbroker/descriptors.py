"""The node's file-descriptor plan.

At start the soft ``RLIMIT_NOFILE`` is raised to the hard limit (a process that keeps many
segments and connections open should not stop at a shell's default of 1024), and the limit is
split so that no one consumer can take every descriptor: half for sealed segments (three each:
the log and its two index mappings; beyond it the least recently used are closed, see
``segments.handles``), a quarter for partitions (each keeps its active segment's log open; past it
creating a topic or partition answers 503), a quarter for connections and everything else.
"""

from __future__ import annotations

import dataclasses
import logging
import resource
from typing import Final

log = logging.getLogger(__name__)
DESCRIPTORS_PER_SEALED_SEGMENT: Final = 3
SEALED_SEGMENTS_MIN: Final = 16
PARTITIONS_MIN: Final = 64
CONNECTIONS_SHARE_DIVISOR: Final = 4


@dataclasses.dataclass(frozen=True, slots=True)
class DescriptorPlan:
    limit: int

    @property
    def sealed_segments_max(self) -> int:
        return max(SEALED_SEGMENTS_MIN, self.limit // 2 // DESCRIPTORS_PER_SEALED_SEGMENT)

    @property
    def partitions_max(self) -> int:
        return max(PARTITIONS_MIN, self.limit // 4)


def raise_open_files_limit() -> int:
    """Raise the soft descriptor limit to the hard one (where allowed); return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("descriptor limit not raised", extra={"fields": {"soft": soft, "hard": hard,
                                                                          "error": str(exc)}})
    return soft
