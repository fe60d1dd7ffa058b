"""``make chaos`` passes its documented settings to ``python -m chaos``: ``DURATION`` and
``ENCRYPTION=1`` (every node with one key ring), checked with ``make -n`` (nothing runs)."""

from __future__ import annotations

import shlex
import subprocess

from tests.conftest import ROOT

PY = "/stand-in/python"
INSTALLED = ".venv/.installed-server+bench"  # taken as made: nothing is installed


def chaos_command(*settings: str) -> list[str]:
    done = subprocess.run(["make", "-n", "--no-print-directory", "-o", "system-deps", "-o", INSTALLED, "chaos",
                           f"PY={PY}", *settings], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(PY)]
    return shlex.split(line)


def test_encryption_1_runs_the_chaos_cluster_with_a_key_ring() -> None:
    assert chaos_command("ENCRYPTION=1", "DURATION=90s") == [PY, "-m", "chaos", "--duration", "90s", "--out",
                                                             "chaos/results", "--encryption"]
    assert "--encryption" not in chaos_command()
