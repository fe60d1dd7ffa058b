"""The README is executable documentation: every shell and Python block runs, in order, as a
person following it would (``tests/docs/readme_runner.py``), against the servers its own blocks
start; a block that cannot run here says why in the source (``<!-- readme: skip (why) -->``).
A failure names the block's line and shows its output."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT
from tests.docs.readme_blocks import parse
from tests.docs.readme_runner import ReadmeRun

README = os.path.join(ROOT, "README.md")


def blocks_of(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_block_of_the_readme_runs_as_written() -> None:
    blocks = parse(blocks_of(README))
    skipped = [b for b in blocks if b.mode == "skip"]
    with ReadmeRun(ROOT, "README.md") as run:
        outcomes = run.run(blocks)
        failures = [o for o in outcomes if not o.ok]
        servers = "\n".join(f"--- background block at line {block.line}:\n{log}"
                            for block, log in run.background_logs()) if failures else ""
    ran = {o.block.line for o in outcomes}
    print(f"README.md: {len(blocks)} blocks, {len(outcomes)} run, {len(skipped)} skipped:")
    for block in skipped:
        print(f"  line {block.line} ({block.language}): {block.reason}")
    assert not failures, "\n\n".join(o.describe("README.md") for o in failures) + "\n\n" + servers
    not_run = [b.line for b in blocks if b.mode != "skip" and b.line not in ran]
    assert not not_run, f"blocks at lines {not_run} were neither run nor marked skip"
