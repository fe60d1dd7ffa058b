"""The layers import one way: http_api -> logbroker -> (segments, coordinator, internal_rpc).

Walks every module's imports with ``ast`` (no import side effects) and checks the table of
DESIGN §2: ``segments`` imports nothing else of the project, and no package imports a layer above.
"""

from __future__ import annotations

import ast
import os

from tests.conftest import ROOT

PACKAGES = ("segments", "coordinator", "internal_rpc", "http_api", "logbroker", "spark_connector", "benchmarks")
# logbroker/cli/command.py is the composition root: its `serve` command starts the HTTP server (decision 0006).
ALLOWED = {("logbroker", "command.py"): {"http_api"}}
FORBIDDEN = {
    "segments": {"coordinator", "internal_rpc", "http_api", "logbroker", "spark_connector", "benchmarks",
                 "aiohttp", "grpc", "etcd3", "aetcd"},
    "coordinator": {"http_api", "spark_connector", "benchmarks"},
    "internal_rpc": {"http_api", "spark_connector", "benchmarks"},
    "logbroker": {"spark_connector", "benchmarks", "http_api"},
    "spark_connector": {"benchmarks", "http_api"},
}


def imported_roots(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_packages_import_only_downward():
    violations = []
    checked = 0
    for package, forbidden in FORBIDDEN.items():
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    checked += 1
                    bad = imported_roots(path) & forbidden - ALLOWED.get((package, name), set())
                    if bad:
                        violations.append(f"{os.path.relpath(path, ROOT)} imports {sorted(bad)}")
    assert checked >= 10
    assert not violations, violations


def test_every_package_exists():
    for package in PACKAGES:
        assert os.path.isfile(os.path.join(ROOT, package, "__init__.py")), package
