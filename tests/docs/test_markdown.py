"""The README and docs/ as a map: every relative link and image points to a file of the
repository (and an anchor to a heading of its file), and every table is well formed (one
separator row, right under its header; the same number of columns in every row)."""

from __future__ import annotations

import glob
import os
import re

import pytest

from tests.conftest import ROOT

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
DOCUMENTS = ["README.md", "SECURITY.md",
             *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                                  recursive=True))]


def prose_lines(path: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    lines: list[tuple[int, str]] = []
    fenced = False
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                lines.append((number, re.sub(r"`[^`]*`", "``", line.rstrip("\n"))))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    return {slug(line.lstrip("#")) for _n, line in prose_lines(path) if re.match(r"^#{1,6} ", line)}


def links(path: str) -> list[tuple[int, str]]:
    return [(number, target) for number, line in prose_lines(path) for target in LINK.findall(line)]


def test_slugs_are_githubs() -> None:
    assert slug("Consumer groups, queues and push streams") == "consumer-groups-queues-and-push-streams"
    assert slug("The regression gate: `make bench-guard`") == "the-regression-gate-make-bench-guard"
    assert slug("A cluster and failover") == "a-cluster-and-failover"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_relative_link_points_to_a_file_and_heading_of_the_repository(document: str) -> None:
    broken = []
    for number, target in links(document):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(ROOT, os.path.dirname(document), path)) if path else \
            os.path.join(ROOT, document)
        if not os.path.exists(resolved):
            broken.append(f"{document}:{number}: {target} (no such file)")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(os.path.relpath(resolved, ROOT)):
            broken.append(f"{document}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_table_has_one_separator_under_its_header_and_even_columns(document: str) -> None:
    problems = []
    table: list[tuple[int, str]] = []
    for number, line in [*prose_lines(document), (0, "")]:
        if line.startswith("|"):
            table.append((number, line))
            continue
        if table:
            separators = [n for n, row in table if SEPARATOR.match(row)]
            if separators != [table[1][0]] if len(table) > 1 else True:
                problems.append(f"{document}:{table[0][0]}: a table's separator rows are at lines {separators}, "
                                f"want one, at line {table[1][0] if len(table) > 1 else '?'}")
            widths = {row.strip().strip("|").count("|") for _n, row in table}
            if len(widths) != 1:
                problems.append(f"{document}:{table[0][0]}: rows of different widths")
            table = []
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("document", ["README.md", "SECURITY.md", "docs/architecture.md"])
def test_the_user_documents_cite_only_what_the_repository_holds(document: str) -> None:
    outside = [f"{document}:{number}: {line.strip()}" for number, line in prose_lines(document)
               if re.search(r"DESIGN §|\.\./shared/|PEERS\.md", line)]
    assert not outside, "cites a document the repository does not hold:\n" + "\n".join(outside)
