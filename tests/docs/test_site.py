"""The documentation site builds in strict mode (a broken link, anchor or nav entry fails it), its
references hold everything the code defines (every HTTP operation of the OpenAPI document, every
node setting, the whole ``broker.proto``, every decision record), and the hooks that make those
pages (``scripts/mkdocs_hooks.py``) render what they are given."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from logbroker import config_docs
from logbroker.config import field_names, resolve
from tests.conftest import ROOT

BUILD_TIMEOUT_S = 300


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", os.path.join(ROOT, "scripts", "mkdocs_hooks.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(config: str, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", config,
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(os.path.join(ROOT, "mkdocs.yml"), out)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert "WARNING" not in result.stderr, result.stderr
    return out


def page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


def test_the_http_reference_lists_every_operation_of_the_openapi_document(site: Path) -> None:
    import http_api.app  # noqa: F401  (registers the routes)
    from http_api.openapi import openapi_document

    html = page(site, "api/http")
    operations = [(method.upper(), path) for path, methods in openapi_document()["paths"].items() for method in methods]
    assert len(operations) > 30
    missing = [f"{m} {p}" for m, p in operations if f"<code>{m} {p}</code>" not in html]
    assert not missing, f"operations missing from the HTTP reference: {missing}"


def test_the_configuration_reference_lists_every_setting(site: Path) -> None:
    html = page(site, "operations/configuration")
    missing = [name for name in field_names() if f"<code>{name}</code>" not in html
               and f"<code>LOGBROKER_{name.upper()}</code>" not in html]
    assert not missing, f"settings missing from the configuration page: {missing}"


def test_the_grpc_reference_holds_the_whole_proto(site: Path) -> None:
    html = page(site, "api/grpc")
    with open(os.path.join(ROOT, "grpc_api", "broker.proto"), encoding="utf-8") as f:
        proto = f.read()
    for rpc in re.findall(r"^\s*rpc (\w+)\(", proto, re.MULTILINE):
        assert rpc in html
    assert "service" in html and "Broker" in html


def test_every_decision_record_is_on_the_index_and_on_the_site(site: Path) -> None:
    html = page(site, "decisions")
    records = [name[:-3] for name in os.listdir(os.path.join(ROOT, "docs", "decisions")) if name.endswith(".md")]
    assert len(records) > 100
    for name in records:
        assert f'href="{name}/"' in html, name
        assert (site / "decisions" / name / "index.html").exists(), name


def test_included_and_copied_files_reach_the_site(site: Path) -> None:
    assert "Who is trusted" in page(site, "security")  # SECURITY.md, included
    assert "kustomize" in page(site, "deployment/kubernetes")  # deploy/kubernetes/README.md, included
    systemd = page(site, "deployment/systemd")
    assert "ExecStart" in systemd and "LOGBROKER_CLUSTER_TOKEN" in systemd
    assert (site / "repo" / "benchmarks" / "results" / "latency.png").exists()
    assert 'src="../repo/benchmarks/results/latency.png"' in page(site, "performance")
    assert "single-node broker: HTTP API" in page(site, "")  # the README's status table, included


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(os.path.join(ROOT, "docs"), docs)
    with open(docs / "concepts" / "index.md", "a", encoding="utf-8") as f:
        f.write("\nSee [a page that is not there](../no-such-page.md).\n")
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = f.read()
    config = config.replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace("  - scripts/mkdocs_hooks.py", f"  - {os.path.join(ROOT, 'scripts', 'mkdocs_hooks.py')}")
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    result = build(str(tmp_path / "mkdocs.yml"), tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_the_configuration_pages_toml_example_names_only_settings(tmp_path: Path) -> None:
    with open(os.path.join(ROOT, config_docs.PAGE), encoding="utf-8") as f:
        text = f.read()
    examples = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    assert examples
    for example in examples:
        values = tomllib.loads(example)
        assert set(values) <= set(field_names()), set(values) - set(field_names())
        path = tmp_path / "node.toml"
        path.write_text(example, encoding="utf-8")
        # With the secrets the page says to keep in the environment, the node takes the file.
        resolve({}, {"LOGBROKER_CLUSTER_TOKEN": "t" * 32, "LOGBROKER_JWT_SECRET": "s" * 48}, str(path))


# -- the hooks' rendering, alone -----------------------------------------------------------------

DOCUMENT = {
    "tags": [{"name": "topics", "description": "Topics | queues"}],
    "paths": {"/v1/topics/{name}": {"get": {
        "tags": ["topics"], "summary": "Describe a topic", "x-logbroker-access": "describe",
        "security": [{"bearer": []}],
        "parameters": [{"name": "name", "in": "path", "required": True,
                        "schema": {"type": "string", "enum": ["a", "b"]}}],
        "responses": {"200": {"description": "The topic"}, "404": {"description": "Unknown name"}}}}},
}


def test_an_operation_is_rendered_with_its_access_parameters_and_statuses() -> None:
    text = hooks().render_openapi(DOCUMENT)
    assert text.startswith("## topics\n\nTopics \\| queues\n")
    assert "### `GET /v1/topics/{name}`" in text
    assert "Access: `describe`." in text
    assert "| `name` | path | string: `a`, `b` | yes |  |" in text
    assert "| 404 | Unknown name |" in text


def test_an_operation_under_an_unlisted_tag_is_refused() -> None:
    document = {**DOCUMENT, "tags": []}
    with pytest.raises(AssertionError, match="topics"):
        hooks().render_openapi(document)


def test_decision_titles_and_the_index() -> None:
    module = hooks()
    assert module.decision_title("# 0296 — Produce streams are pipelined\n\ntext") == "Produce streams are pipelined"
    index = module.render_decisions([("0296-produce.md", "# 0296 — Pipelined | fast\n"),
                                      ("0002-flush.md", "# 0002 — Flush\n")])
    rows = [line for line in index.splitlines() if line.startswith("| 0")]
    assert rows == ["| 0002 | [Flush](0002-flush.md) |", "| 0296 | [Pipelined \\| fast](0296-produce.md) |"]


def test_links_out_of_docs_point_at_copies_and_folders_at_their_index() -> None:
    module = hooks()
    text = ("![plot](../benchmarks/results/latency.png) [d](decisions/) [x](https://e.org/a.png) "
            "[p](api/http.md#reference)")
    assert module.point_to_copies("docs/performance.md", text, ROOT) == (
        "![plot](repo/benchmarks/results/latency.png) [d](decisions/index.md) [x](https://e.org/a.png) "
        "[p](api/http.md#reference)")
    assert module.repo_targets("docs/performance.md", text, ROOT) == ["benchmarks/results/latency.png"]


def test_fill_puts_the_settings_table_between_its_markers() -> None:
    text = f"before\n{config_docs.BEGIN}\n| stale |\n{config_docs.END}\nafter\n"
    filled = hooks().fill(text, settings_table=config_docs.render_table())
    assert config_docs.section(filled) == config_docs.render_table()
    assert filled.startswith("before\n") and filled.endswith(f"{config_docs.END}\nafter\n")
