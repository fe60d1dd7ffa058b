"""The README and the documentation site are executable documentation: every shell and Python block
runs, in order, as a person following them would (``tests/docs/readme_runner.py``), against the
servers their own blocks start; a block that cannot run here says why in the source
(``<!-- readme: skip (why) -->``). The site's pages run in the order of its navigation, in one run
(a page's examples may use the node an earlier page started, as a reader's would), each page a
section of its own. A failure names the file, the block's line and shows its output."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.docs.readme_blocks import Block, parse
from tests.docs.readme_runner import ReadmeRun

README = os.path.join(ROOT, "README.md")


def blocks_of(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type hints
    """mkdocs.yml as data: its ``!!python/name:`` tags (Markdown extensions' hooks) read as None."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda _loader, _suffix, _node: None)


def _pages(entry: Any) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, list):
        return [page for item in entry for page in _pages(item)]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in _pages(value)]
    return []


def site_pages() -> list[str]:
    """The site's Markdown pages in the order of its navigation (generated pages left out), as
    repository paths."""
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = yaml.load(f, Loader=_Loader)
    docs = config["docs_dir"]
    return [os.path.join(docs, page) for page in _pages(config["nav"])
            if os.path.exists(os.path.join(ROOT, docs, page))]


def run_and_check(files: Sequence[str], blocks: Sequence[Block]) -> None:
    skipped = [b for b in blocks if b.mode == "skip"]
    with ReadmeRun(ROOT, files[0]) as run:
        outcomes = run.run(blocks)
        failures = [o for o in outcomes if not o.ok]
        servers = "\n".join(f"--- background block at {block.file} line {block.line}:\n{log}"
                            for block, log in run.background_logs()) if failures else ""
    ran = {(o.block.file, o.block.line) for o in outcomes}
    print(f"{', '.join(files)}: {len(blocks)} blocks, {len(outcomes)} run, {len(skipped)} skipped:")
    for block in skipped:
        print(f"  {block.file} line {block.line} ({block.language}): {block.reason}")
    assert not failures, "\n\n".join(o.describe() for o in failures) + "\n\n" + servers
    not_run = [f"{b.file}:{b.line}" for b in blocks if b.mode != "skip" and (b.file, b.line) not in ran]
    assert not not_run, f"blocks at {not_run} were neither run nor marked skip"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_block_of_the_readme_runs_as_written() -> None:
    run_and_check(["README.md"], parse(blocks_of(README), "README.md"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_block_of_the_sites_pages_runs_as_written() -> None:
    pages = site_pages()
    blocks = [block for page in pages
              for block in parse(blocks_of(os.path.join(ROOT, page)), page, sections=False)]
    assert any(b.file == "docs/getting-started.md" and b.mode == "background" for b in blocks), \
        "Getting started starts the node the other pages use"
    run_and_check(pages, blocks)


def test_the_site_pages_are_read_from_the_navigation() -> None:
    pages = site_pages()
    assert pages[:2] == ["docs/index.md", "docs/getting-started.md"]
    assert "docs/operations/clusters.md" in pages and "docs/decisions/index.md" not in pages
    assert all(re.match(r"^docs/[a-z0-9/-]+\.md$", page) for page in pages), pages


def _installed_by_make_test() -> set[str]:
    """The commands ``scripts/ensure-system-deps.sh`` (a prerequisite of ``make test``) installs when missing."""
    with open(os.path.join(ROOT, "scripts", "ensure-system-deps.sh"), encoding="utf-8") as f:
        return set(re.findall(r"command -v (\w+)", f.read()))


def test_no_block_is_skipped_for_a_command_the_suite_installs() -> None:
    """A block skipped because it "needs" a tool that ``make test`` installs would run here: it
    must run, so that what it shows is kept true."""
    installed = _installed_by_make_test()
    assert {"promtool", "etcd", "java"} <= installed
    wrong = [f"{block.file}:{block.line} ({block.reason})"
             for path in ["README.md", *site_pages()]
             for block in parse(blocks_of(os.path.join(ROOT, path)), path, sections=False)
             if block.mode == "skip" and set(re.findall(r"\bneeds (\w+)", block.reason)) & installed]
    assert not wrong, f"skipped for a tool the suite installs: {wrong}"


# Pages of a capability a newcomer tries on one machine: each shows it working with blocks the
# site's run executes, not only with skipped ones.
DEMONSTRATED = ("docs/security/encryption.md", "docs/operations/usage.md", "docs/operations/monitoring.md",
                "docs/getting-started.md")


@pytest.mark.parametrize("page", DEMONSTRATED)
def test_a_capabilitys_page_runs_some_of_its_examples(page: str) -> None:
    assert page in site_pages()
    blocks = parse(blocks_of(os.path.join(ROOT, page)), page, sections=False)
    assert [b for b in blocks if b.mode != "skip" and b.language == "sh"], f"{page}: every example is skipped"


# Each capability a newcomer can try on one machine, and what a block showing it must hold.
SHOWN_BY = {"encryption at rest": "--encryption-keys-file", "leaders by rack": "leader_racks=",
            "usage records": "/v1/usage", "alert rules": "promtool test rules",
            "Kubernetes manifests": "kubectl kustomize"}


@pytest.mark.parametrize("capability", sorted(SHOWN_BY))
def test_each_capability_is_shown_by_a_block_the_site_runs(capability: str) -> None:
    needle = SHOWN_BY[capability]
    running = [f"{block.file}:{block.line}" for page in site_pages()
               for block in parse(blocks_of(os.path.join(ROOT, page)), page, sections=False)
               if block.mode != "skip" and needle in block.code]
    assert running, f"no block the site's run executes shows {capability} ({needle!r})"
