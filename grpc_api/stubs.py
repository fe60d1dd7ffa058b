"""The Python modules generated from ``broker.proto`` by grpcio-tools' protoc.

They are build products, not committed: made by the project's set-up (``make``'s install step,
the image build) and, when missing or older than the ``.proto`` (a fresh ``pip install -e .``),
here on first import. Files are written to a temporary folder and renamed into place, so nodes
starting side by side never import a half-written module.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from types import ModuleType
from typing import Final

PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))
ROOT: Final = os.path.dirname(PACKAGE_DIR)
PROTO: Final = os.path.join(PACKAGE_DIR, "broker.proto")
GENERATED: Final = ("broker_pb2.py", "broker_pb2_grpc.py", "broker_pb2.pyi")


class StubGenerationError(RuntimeError):
    """protoc could not turn ``broker.proto`` into Python modules."""


def stale() -> bool:
    proto_mtime = os.stat(PROTO).st_mtime
    for name in GENERATED:
        path = os.path.join(PACKAGE_DIR, name)
        if not os.path.exists(path) or os.stat(path).st_mtime < proto_mtime:
            return True
    return False


def generate() -> None:
    """Run protoc (from grpcio-tools) on ``broker.proto`` into this package's folder."""
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix=".protoc-", dir=PACKAGE_DIR) as out:
        status = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out}",
                              f"--pyi_out={out}", f"--grpc_python_out={out}", os.path.relpath(PROTO, ROOT)])
        if status != 0:
            raise StubGenerationError(f"protoc failed on {PROTO} (exit status {status})")
        for name in GENERATED:
            os.replace(os.path.join(out, "grpc_api", name), os.path.join(PACKAGE_DIR, name))


def load() -> tuple[ModuleType, ModuleType]:
    """``(broker_pb2, broker_pb2_grpc)``, generated first when missing or stale."""
    if stale():
        generate()
    return importlib.import_module("grpc_api.broker_pb2"), importlib.import_module("grpc_api.broker_pb2_grpc")


if __name__ == "__main__":
    generate()
