"""No module of the project's packages is over ``LINES_MAX`` lines (the issue "one broker core":
a module that grows past it is split into parts with one job each, as decisions 0393 and 0397
did). Tests and generated code (the gRPC stubs, ``*_pb2*.py``) are not counted."""

from __future__ import annotations

import fnmatch
import os
from typing import Final

from tests.conftest import ROOT
from tests.test_layering import PACKAGES

LINES_MAX: Final = 700
GENERATED: Final = "*_pb2*.py"  # the gRPC stubs grpcio-tools writes (grpc_api/stubs.py)


def module_sizes() -> dict[str, int]:
    """Lines of every ``.py`` module under the packages, by path relative to the repository."""
    sizes = {}
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(ROOT, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for file in files:
                if not file.endswith(".py") or fnmatch.fnmatch(file, GENERATED):
                    continue
                path = os.path.join(folder, file)
                with open(path, encoding="utf-8") as f:
                    sizes[os.path.relpath(path, ROOT)] = sum(1 for _ in f)
    return sizes


def test_every_module_of_the_packages_is_counted() -> None:
    sizes = module_sizes()
    assert "segments/log.py" in sizes and "coordinator/etcd.py" in sizes
    assert not any(path.startswith("tests/") for path in sizes)


def test_no_module_is_over_the_line_bound() -> None:
    over = sorted(((lines, path) for path, lines in module_sizes().items() if lines > LINES_MAX), reverse=True)
    assert not over, f"modules over {LINES_MAX} lines (split them by job): " + ", ".join(
        f"{path} ({lines} lines)" for lines, path in over)
