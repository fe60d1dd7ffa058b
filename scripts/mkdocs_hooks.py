"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks``): the pages that are made from
the code when the site is built, so that they cannot drift from it.

- The HTTP API reference: the OpenAPI document a node serves at ``/v1/openapi.json``
  (``http_api.openapi.openapi_document``, itself made from the route table), rendered as Markdown
  where a page holds ``OPENAPI_MARKER``.
- The gRPC API reference: ``grpc_api/broker.proto`` as it is, where a page holds ``PROTO_MARKER``.
- The settings table: ``logbroker.config_docs.render_table()`` between that module's markers
  (the committed page holds the same table; ``tests/logbroker/test_config_docs.py`` checks it).
- The index of the decision records (``decisions/index.md``), one line per record with its title.
- Files of the repository outside ``docs/`` that a page links to (``../benchmarks/results/latency.png``,
  a path that also works when the page is read in the repository) are copied under ``repo/`` and
  the link is pointed there, with what the copied Markdown files link to in turn.

The rendering functions are pure (text in, text out) and tested in ``tests/docs/test_site.py``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

ROOT: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPENAPI_MARKER: Final = "<!-- site: http-api-reference -->"
PROTO_MARKER: Final = "<!-- site: grpc-proto -->"
PROTO_PATH: Final = os.path.join(ROOT, "grpc_api", "broker.proto")
DECISIONS_INDEX: Final = "decisions/index.md"
DECISION_FILE: Final = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")
REPO_COPY: Final = "repo"
LINK: Final = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)([^)]*\))")
EXTERNAL: Final = re.compile(r"^[a-z][a-z0-9+.-]*:")
COPY_DEPTH_MAX: Final = 3  # a copied page's links are followed this many steps, no further


# -- pure rendering ------------------------------------------------------------------------------

def _cell(text: object) -> str:
    """``text`` fit for one cell of a Markdown table: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _type_of(schema: Mapping[str, Any]) -> str:
    kind = str(schema.get("type", "any"))
    if "enum" in schema:
        return kind + ": " + ", ".join(f"`{v}`" for v in schema["enum"])
    bounds = [f"{name} {schema[key]}" for key, name in (("minimum", "≥"), ("maximum", "≤")) if key in schema]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def render_operation(method: str, path: str, operation: Mapping[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", f"{operation.get('summary', '')}.",
             "", f"Access: `{operation.get('x-logbroker-access', 'user')}`"
             + ("" if operation.get("security") else " (no token needed)") + ".", ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        lines += [f"| `{p['name']}` | {p['in']} | {_cell(_type_of(p.get('schema', {})))} | "
                  f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |" for p in parameters]
        lines.append("")
    body = operation.get("requestBody")
    if body:
        for content_type, content in body["content"].items():
            lines += [f"Request body (`{content_type}`):", "", "```json",
                      json.dumps(content.get("schema", {}), indent=2, ensure_ascii=False), "```", ""]
    lines += ["| status | meaning |", "|---|---|"]
    lines += [f"| {status} | {_cell(answer.get('description', ''))} |"
              for status, answer in operation.get("responses", {}).items()]
    return [*lines, ""]


def render_openapi(document: Mapping[str, Any]) -> str:
    """The reference: one section per tag (in the document's order), one entry per operation."""
    by_tag: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for tag in operation.get("tags", ["other"]):
                by_tag.setdefault(tag, []).append((method, path, operation))
    lines: list[str] = []
    for tag in document.get("tags", []):
        lines += [f"## {tag['name']}", "", _cell(tag.get("description", "")), ""]
        for method, path, operation in by_tag.pop(tag["name"], []):
            lines += render_operation(method, path, operation)
    assert not by_tag, f"operations under tags the document does not list: {sorted(by_tag)}"
    return "\n".join(lines).rstrip("\n") + "\n"


def render_proto(proto: str) -> str:
    return f"```protobuf\n{proto.rstrip()}\n```\n"


def decision_title(text: str) -> str:
    """A record's title: its first heading without the number it repeats."""
    for line in text.splitlines():
        if line.startswith("# "):
            return re.sub(r"^(Decision\s+)?\d{4}[:.]?\s*(—|-|:)?\s*", "", line[2:].strip()) or line[2:].strip()
    return ""


def render_decisions(records: Iterable[tuple[str, str]]) -> str:
    """The index page from (file name, text) of every record, by number."""
    lines = ["# Design decisions", "",
             "Why each part is built as it is: one short record per decision, cited by number across these "
             "pages and the code. Newest last.", "",
             "| number | decision |", "|---|---|"]
    for name, text in sorted(records):
        found = DECISION_FILE.match(name)
        assert found, f"a decision record's file name is NNNN-words.md: {name}"
        lines.append(f"| {found.group(1)} | [{_cell(decision_title(text) or name)}]({name}) |")
    return "\n".join(lines) + "\n"


def repo_targets(page: str, markdown: str, root: str) -> list[str]:
    """Repository paths (relative to ``root``) of the files outside ``docs/`` that ``markdown``, the
    page at repository path ``page``, links to relatively."""
    found = []
    for _opening, target, _rest in LINK.findall(markdown):
        if EXTERNAL.match(target) or target.startswith("/"):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if not path.startswith(("docs" + os.sep, "..")) and os.path.isfile(os.path.join(root, path)):
            found.append(path)
    return found


def point_to_copies(page: str, markdown: str, root: str) -> str:
    """``markdown`` with each link to a repository file outside ``docs/`` pointed at its copy under
    ``repo/``, and each link to a folder of ``docs/`` at its index page (paths relative to the
    site's pages: ``page`` is ``docs/...``)."""
    def repoint(found: re.Match[str]) -> str:
        opening, target, rest = found.groups()
        if EXTERNAL.match(target) or target.startswith("/"):
            return found.group(0)
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if path.startswith("docs" + os.sep) and os.path.isdir(os.path.join(root, path)):
            return f"{opening}{target.rstrip('/')}/index.md{rest}"  # a folder: its index page
        if path.startswith(("docs" + os.sep, "..")) or not os.path.isfile(os.path.join(root, path)):
            return found.group(0)
        copy = os.path.join("docs", REPO_COPY, path)
        return f"{opening}{os.path.relpath(copy, os.path.dirname(page))}{rest}"
    return LINK.sub(repoint, markdown)


def fill(markdown: str, *, openapi: Mapping[str, Any] | None = None, proto: str | None = None,
         settings_table: str | None = None) -> str:
    """``markdown`` with each generated part in place of its marker."""
    from logbroker import config_docs

    if openapi is not None and OPENAPI_MARKER in markdown:
        markdown = markdown.replace(OPENAPI_MARKER, render_openapi(openapi))
    if proto is not None and PROTO_MARKER in markdown:
        markdown = markdown.replace(PROTO_MARKER, render_proto(proto))
    if settings_table is not None and config_docs.BEGIN in markdown:
        start, end = markdown.index(config_docs.BEGIN) + len(config_docs.BEGIN), markdown.index(config_docs.END)
        markdown = markdown[:start] + "\n" + settings_table + "\n" + markdown[end:]
    return markdown


# -- MkDocs events -------------------------------------------------------------------------------

def _openapi() -> dict[str, Any]:
    import http_api.app  # noqa: F401  (registers the routes)
    from http_api.openapi import openapi_document

    return openapi_document()


def _page_path(src_uri: str) -> str:
    """The repository path of a site page (a copy under ``repo/`` stands for its original)."""
    if src_uri.startswith(REPO_COPY + "/"):
        return src_uri[len(REPO_COPY) + 1:]
    return os.path.join("docs", src_uri)


def _copy_linked(files: Any, config: Any) -> None:
    from mkdocs.structure.files import File

    pending = [(os.path.join("docs", f.src_uri), 0) for f in files.documentation_pages()]
    copied: set[str] = set()
    while pending:
        page, depth = pending.pop()
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for path in repo_targets(page, text, ROOT):
            if path in copied:
                continue
            copied.add(path)
            files.append(File.generated(config, f"{REPO_COPY}/{path}", abs_src_path=os.path.join(ROOT, path)))
            if path.endswith(".md") and depth < COPY_DEPTH_MAX:
                pending.append((path, depth + 1))


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated index of the decision records and the copies of linked repository files."""
    from mkdocs.structure.files import File

    _copy_linked(files, config)

    directory = os.path.join(config["docs_dir"], "decisions")
    records = []
    for name in os.listdir(directory):
        if DECISION_FILE.match(name):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                records.append((name, f.read()))
    files.append(File.generated(config, DECISIONS_INDEX, content=render_decisions(records)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from logbroker import config_docs

    openapi = _openapi() if OPENAPI_MARKER in markdown else None
    proto = None
    if PROTO_MARKER in markdown:
        with open(PROTO_PATH, encoding="utf-8") as f:
            proto = f.read()
    table = config_docs.render_table() if config_docs.BEGIN in markdown else None
    markdown = fill(markdown, openapi=openapi, proto=proto, settings_table=table)
    page_path = _page_path(page.file.src_uri)
    if page_path.startswith("docs" + os.sep):
        return point_to_copies(page_path, markdown, ROOT)
    return markdown
