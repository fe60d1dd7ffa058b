"""Real node processes for tests: ``logbroker.launcher.NodeProcess`` run from the checkout, with
a short maintenance interval so flushes and checkpoints happen within a test."""

from __future__ import annotations

import os
from pathlib import Path

from logbroker import launcher
from logbroker.certs import generate
from tests.conftest import ROOT

# For tests that need a topic with many small segments: lowers the node's floor for a topic's
# segment_bytes (1 MiB by default, decision 0156).
SMALL_SEGMENTS = ("--topic-segment-bytes-min", "1024")


def make_certs(out: str) -> Path:
    """A CA and a certificate for node 1 in ``out`` (``logbroker certs``' own code)."""
    generate(out, [1])
    return Path(out)


def tls_args(certs: Path) -> tuple[str, ...]:
    """The flags that make a node serve HTTPS with node 1's certificate from ``make_certs``."""
    return ("--tls-cert-file", str(certs / "node-1.pem"), "--tls-key-file", str(certs / "node-1.key"))


class NodeProcess(launcher.NodeProcess):
    def __init__(self, data_dir: str, *extra: str, node_id: int = 1) -> None:
        super().__init__(data_dir, "--maintenance-interval-ms", "200", *extra, node_id=node_id, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
