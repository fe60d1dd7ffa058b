"""Every module of the client library and of the CLI imports on its own, in a fresh interpreter: a
user may start from any of them (``import logbroker.client.group_consumer``), so none may depend on
another having been imported first (an import circle fails exactly this way)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.conftest import ROOT

PACKAGES = ("logbroker.client", "logbroker.cli")
IMPORT_TIMEOUT_S = 120
PARALLEL_IMPORTS = 4


def modules_of(package: str) -> list[str]:
    """The dotted names of ``package`` and of every module under it, found on disk (not imported)."""
    top = os.path.join(ROOT, *package.split("."))
    names = []
    for folder, _, files in os.walk(top):
        for file in sorted(files):
            if file.endswith(".py"):
                parts = os.path.relpath(os.path.join(folder, file), ROOT)[: -len(".py")].split(os.sep)
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_every_client_and_cli_module_imports_alone():
    modules = [m for package in PACKAGES for m in modules_of(package)]
    assert {"logbroker.client", "logbroker.client.group_consumer", "logbroker.client.queue_consumer",
            "logbroker.client.sync", "logbroker.cli", "logbroker.cli.command"} <= set(modules)
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONDONTWRITEBYTECODE": "1"}

    def import_alone(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=IMPORT_TIMEOUT_S)

    with ThreadPoolExecutor(max_workers=PARALLEL_IMPORTS) as pool:
        results = dict(zip(modules, pool.map(import_alone, modules), strict=True))
    failures = {m: r.stderr.strip().splitlines()[-1:] for m, r in results.items() if r.returncode != 0}
    assert not failures, failures


def test_the_client_loads_nothing_of_the_server():
    """What ``import logbroker.client`` loads at run time: no server package, and of the storage
    engine only the batch format (the layering test sees import statements, this sees modules)."""
    probe = ("import sys, logbroker.client; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('segments', 'http_api', 'coordinator', 'internal_rpc') or m.startswith('logbroker.') "
             "and not m.startswith('logbroker.client'))))")
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=IMPORT_TIMEOUT_S, check=True)
    loaded = set(done.stdout.split())
    assert "segments.batch" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("http_api", "coordinator", "internal_rpc")}, loaded
    assert not loaded & {"segments.log", "segments.segment", "segments.handles", "segments.index"}, loaded
    assert not {m for m in loaded if m.startswith("logbroker.")}, loaded
