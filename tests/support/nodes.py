"""Real node processes for tests: ``logbroker.launcher.NodeProcess`` run from the checkout, with
a short maintenance interval so flushes and checkpoints happen within a test."""

from __future__ import annotations

import os

from logbroker import launcher
from tests.conftest import ROOT

# For tests that need a topic with many small segments: lowers the node's floor for a topic's
# segment_bytes (1 MiB by default, decision 0156).
SMALL_SEGMENTS = ("--topic-segment-bytes-min", "1024")


class NodeProcess(launcher.NodeProcess):
    def __init__(self, data_dir: str, *extra: str, node_id: int = 1) -> None:
        super().__init__(data_dir, "--maintenance-interval-ms", "200", *extra, node_id=node_id, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
