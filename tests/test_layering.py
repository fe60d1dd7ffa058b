"""The layers import one way: http_api -> logbroker -> (segments, coordinator, internal_rpc), and the
client library (``logbroker.client``) imports nothing of the server.

Walks every module's imports with ``ast`` (no import side effects; imports inside functions and
under ``TYPE_CHECKING`` count too). Each import is read as the dotted name it reaches: ``import a.b``
is ``a.b``, ``from a.b import c`` is ``a.b.c`` (a submodule or a name of ``a.b``), and relative
imports are resolved against the importing module. A rule forbids name prefixes to the modules of
its scope, with exceptions; a prefix matches itself and every name under it. The table follows
DESIGN §2; decisions 0006 (the CLI starts the HTTP server) and 0153 (what the client and
``http_api`` may take from ``segments``) give the exceptions. Decision 0279 adds two: the client
and the storage engine it stands on take no library of the ``server`` extra (the base install is
the client alone), and no package the distribution ships imports one it does not ship.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping

from tests.conftest import ROOT
from tests.support.distribution import shipped_packages

PACKAGES = ("segments", "coordinator", "internal_rpc", "http_api", "grpc_api", "kafka_api", "logbroker",
            "spark_connector", "benchmarks", "chaos", "sim")
PROJECT = (*PACKAGES, "tests")
CLIENT = "logbroker.client"
CLI = "logbroker.cli"
# The pure record-batch codec: the binary media type of the HTTP API, built by producers and checked
# by consumers. Nothing else of segments (files, indexes, logs, checkpoints) is the client's business.
BATCH_CODEC = "segments.batch"
# The same codec's record-at-a-time reader and its error: a consumer decodes the good records of a
# batch up to a bad one, as the server's readers do (decision 0220).
RECORD_READER = ("segments.record_reader.iter_records", "segments.errors.InvalidBatchError")
# Where a keyed record goes: the one rule the broker, the Spark sink and the client share (0388).
KEY_PLACEMENT = "segments.partitioning"
SERVE_COMMAND = "logbroker.cli.command"
ENCRYPTION = "segments.encryption"
NETWORK_LIBS = ("aiohttp", "grpc", "etcd3", "aetcd")
# What the `server` extra installs, by import name (a test of tests/test_distribution.py checks the
# list against setup.cfg).
SERVER_LIBS = ("msgspec", "uvloop", "jwt", "cryptography", "grpc", "grpc_tools", "grpc_reflection", "google",
               "aetcd", "prometheus_client", "swagger_ui_bundle", "kio", "crc32c", "aiokafka")
# Kafka's record format as stored (decision 0389) is read everywhere, the client too; aiokafka's
# compiled reader speeds it where the server extra installed it, the reference decoder stands in.
KAFKA_RECORDS = "segments.kafka_records"
COMPILED_KAFKA_READER = "aiokafka.record._crecords"
SHIPPED = shipped_packages()


@dataclasses.dataclass(frozen=True)
class Rule:
    """Modules named ``scope`` or under it, except those under ``outside``, may not import a name
    under ``forbidden`` unless it is also under ``allowed``."""

    scope: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()

    def governs(self, module: str) -> bool:
        return under(module, (self.scope,)) and not under(module, self.outside)


RULES = (
    Rule("segments", (*PROJECT, *NETWORK_LIBS), allowed=("segments",)),
    Rule("coordinator", ("http_api", "spark_connector", "benchmarks", CLIENT, CLI)),
    Rule("internal_rpc", ("http_api", "spark_connector", "benchmarks", CLIENT, CLI)),
    # The node does not use the HTTP layer; the CLI's serve command starts it (decision 0006).
    Rule("logbroker", ("spark_connector", "benchmarks", "http_api"), outside=(SERVE_COMMAND,)),
    Rule(SERVE_COMMAND, ("spark_connector", "benchmarks", "http_api"), allowed=("http_api.server",)),
    # The server does not depend on the client library or the command line.
    Rule("logbroker", (CLIENT, CLI), outside=(CLIENT, CLI, "logbroker.__main__")),
    # What a user imports: itself, third-party libraries and the batch codec, nothing of the server.
    Rule(CLIENT, PROJECT, allowed=(CLIENT, BATCH_CODEC, *RECORD_READER, KEY_PLACEMENT)),
    # The HTTP layer reaches storage through logbroker: of segments it takes only the batch codec and
    # the two value types the node's fetch hands back unchanged (storage errors come re-exported by
    # logbroker.errors).
    Rule("http_api", ("segments",), allowed=(BATCH_CODEC, "segments.log.LogRead", "segments.log.LogSlice")),
    Rule("http_api", ("spark_connector", "benchmarks", CLIENT, CLI)),
    # The queue routes are served by the broker's front door (decision 0402): their handlers reach
    # the broker through it (``http_api.keys.FRONT_DOOR``), never the node, its queue manager or
    # the HTTP hooks that authorized and charged before the front door did.
    Rule("http_api.queues", ("http_api.keys.NODE", "logbroker.node", "logbroker.queues.manager",
                             "logbroker.queue_hosting", "http_api.user_limits", "http_api.first_use")),
    Rule("spark_connector", ("benchmarks", "http_api", "grpc_api")),
    # The public gRPC API sits beside HTTP: it reaches storage through logbroker (of segments, only
    # the batch codec's record types) and takes nothing of the HTTP layer (error codes are mapped
    # once, in logbroker.error_codes, decision 0345); nothing but the serve path (http_api.server)
    # starts it. It is no HTTP client either: a group subscription calls the group coordinator, or
    # another node's gRPC listener, never a node's HTTP listener (decision 0346).
    Rule("grpc_api", ("segments", "spark_connector", "benchmarks", CLIENT, CLI, "http_api", "aiohttp"),
         allowed=(BATCH_CODEC,)),
    Rule("http_api", ("grpc_api",), allowed=("grpc_api.server",)),
    Rule("logbroker", ("grpc_api",)),
    # The Kafka listener (decision 0387) sits beside HTTP and gRPC on the same front door: of
    # segments it takes the batch codec and Kafka's record format (0389) with their errors, the
    # fetch's value type and the kinds of topic settings (to read Kafka's config names), nothing of
    # the other protocols; only the serve path starts it.
    Rule("kafka_api", ("segments", "spark_connector", "benchmarks", CLIENT, CLI, "http_api", "grpc_api", "aiohttp"),
         allowed=(BATCH_CODEC, KEY_PLACEMENT, KAFKA_RECORDS, "segments.log.LogRead", "segments.config.CONFIG_FLOAT",
                  "segments.config.CONFIG_INT", "segments.errors.InvalidBatchError",
                  "segments.errors.RecordsTooLargeError")),
    Rule("http_api", ("kafka_api",), allowed=("kafka_api.server",)),
    Rule("grpc_api", ("kafka_api",)),
    Rule("logbroker", ("kafka_api",)),
    # The fault harness (decision 0209) drives the broker from outside, as a user does: nothing of
    # the broker imports it, and it takes nothing of the server's HTTP layer or of the tests.
    *(Rule(package, ("chaos",)) for package in ("coordinator", "internal_rpc", "logbroker", "http_api",
                                                  "grpc_api", "kafka_api", "spark_connector", "benchmarks")),
    Rule("chaos", ("http_api", "spark_connector", "benchmarks", "tests")),
    # The deterministic simulation (decision 0355) runs the broker's own code in one process: it
    # imports the broker, nothing of the broker imports it, and it takes nothing of the tests.
    *(Rule(package, ("sim",)) for package in ("segments", "coordinator", "internal_rpc", "logbroker", "http_api",
                                                "grpc_api", "kafka_api", "spark_connector", "benchmarks", "chaos")),
    Rule("sim", ("spark_connector", "benchmarks", "tests")),
    # The base install is the client (decision 0279): it and the storage engine under it need no
    # library of the server extra; what the distribution ships needs nothing it leaves out.
    Rule(CLIENT, SERVER_LIBS),
    Rule("segments", (COMPILED_KAFKA_READER,), outside=(KAFKA_RECORDS,)),
    # The cipher of encryption at rest (decision 0315) is the one module of segments that needs the
    # server extra (``cryptography``): the node and the Spark readers import it; nothing else of
    # segments does, so the client's codec never loads it.
    Rule("segments", SERVER_LIBS, outside=(ENCRYPTION,), allowed=(COMPILED_KAFKA_READER,)),
    Rule("segments", (ENCRYPTION,), outside=(ENCRYPTION,)),
    *(Rule(package, tuple(p for p in PROJECT if p not in SHIPPED)) for package in SHIPPED),
)


def under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def imported_names(module: str, source: str, *, is_package: bool = False) -> set[str]:
    """Every dotted name ``source`` (the text of ``module``) imports, relative ones resolved."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                assert node.level - 1 <= len(package), f"{module}: relative import above the top package"
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names.update(base if alias.name == "*" else f"{base}.{alias.name}".lstrip(".") for alias in node.names)
    return names


def violations(module: str, names: Iterable[str], rules: Iterable[Rule] = RULES) -> list[str]:
    found = []
    for rule in rules:
        if rule.governs(module):
            found += [f"{module} imports {name} (rule for {rule.scope})" for name in sorted(names)
                      if under(name, rule.forbidden) and not under(name, rule.allowed)]
    return found


def project_modules() -> Iterator[tuple[str, str, bool]]:
    """(dotted name, path, is a package) of every module of the packages."""
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for file in sorted(files):
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    parts = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
                    is_package = parts[-1] == "__init__"
                    yield ".".join(parts[:-1] if is_package else parts), path, is_package


def read_imports() -> dict[str, set[str]]:
    imports = {}
    for module, path, is_package in project_modules():
        with open(path, encoding="utf-8") as f:
            imports[module] = imported_names(module, f.read(), is_package=is_package)
    return imports


def import_graph(imports: Mapping[str, set[str]], *packages: str) -> dict[str, set[str]]:
    """Which modules of ``packages`` each of them imports (a name maps to the longest module it is
    in or under; the implicit import of a module's parent packages is no edge)."""
    modules = [m for m in imports if under(m, packages)]
    graph: dict[str, set[str]] = {}
    for module in modules:
        targets = set()
        for name in imports[module]:
            owners = [m for m in modules if under(name, (m,))]
            if owners:
                targets.add(max(owners, key=len))
        graph[module] = targets - {module}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle through each module that is on one (depth-first search, white/grey/black)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_packages_import_only_downward():
    imports = read_imports()
    found = [v for module, names in sorted(imports.items()) for v in violations(module, names)]
    assert len(imports) >= 100 and {CLIENT, f"{CLIENT}.core", SERVE_COMMAND} <= set(imports)
    assert not found, found


def test_client_and_cli_have_no_import_cycle():
    imports = read_imports()
    for package in (CLIENT, CLI):
        graph = import_graph(imports, package)
        assert len(graph) >= 3, graph
        assert not cycles(graph), cycles(graph)


# The helpers the node composes: each takes the narrow ports of ``logbroker.ports`` or the node's
# collaborators, never the node (decision 0360), so none of them imports ``logbroker.node``.
NODE_HELPERS = (
    "logbroker.cluster_groups", "logbroker.cluster_metrics", "logbroker.reconciler", "logbroker.first_use",
    "logbroker.partition_moves", "logbroker.peers", "logbroker.ports", "logbroker.replication.manager",
    "logbroker.rpc_service", "logbroker.storage_usage",
    # The parts the node is split into (decision 0393): each takes collaborators, not the node.
    "logbroker.routing", "logbroker.write_path", "logbroker.read_path", "logbroker.topic_admin",
    "logbroker.queue_hosting")


def test_no_import_circle():
    imports = read_imports()
    graph = import_graph(imports, *PACKAGES)
    assert {"logbroker.node", *NODE_HELPERS} <= set(graph)
    assert not cycles(graph), cycles(graph)


def test_the_nodes_helpers_do_not_import_the_node():
    imports = read_imports()
    graph = import_graph(imports, *PACKAGES)
    assert all(helper in graph for helper in NODE_HELPERS)
    assert [helper for helper in NODE_HELPERS if "logbroker.node" in graph[helper]] == []


def test_every_package_exists():
    for package in PACKAGES:
        assert os.path.isfile(os.path.join(ROOT, package, "__init__.py")), package


def test_the_distribution_ships_the_broker_and_not_the_harnesses():
    assert set(SHIPPED) == set(PACKAGES) - {"benchmarks", "chaos", "sim"}


# ---- the checker itself ------------------------------------------------------------------------


def check(module: str, source: str, *, is_package: bool = False) -> list[str]:
    return violations(module, imported_names(module, source, is_package=is_package))


def test_names_are_resolved_the_way_python_imports_them():
    source = ("import a.b, c\nfrom d.e import f as g\nfrom . import core\nfrom ..records import key_partition\n"
              "from .sse import *\n")
    assert imported_names("logbroker.client.producer", source) == {
        "a.b", "c", "d.e.f", "logbroker.client.core", "logbroker.records.key_partition", "logbroker.client.sse"}
    assert imported_names("logbroker.client", "from . import core", is_package=True) == {"logbroker.client.core"}


def test_checker_flags_a_client_module_that_reaches_the_server():
    assert check("logbroker.client.producer", "from logbroker.client.core import Client\n"
                 "from segments.batch import encode_batch\nimport aiohttp, msgpack, xxhash\n") == []
    for bad in ("from logbroker.records import key_partition", "from logbroker import errors",
                "from ..records import key_partition", "import segments.log", "from segments import errors",
                "from coordinator.errors import CoordinatorError", "import http_api.server",
                "from spark_connector import register", "from tests.support.nodes import NodeProcess"):
        assert check("logbroker.client.producer", bad), bad


def test_checker_keeps_http_api_off_segment_internals():
    allowed = "from segments.batch import iter_batches\nfrom segments.log import LogRead, LogSlice\n"
    assert check("http_api.streams", allowed) == []
    for bad in ("from segments.log import PartitionLog", "import segments.log", "from segments import log",
                "from segments.errors import OffsetOutOfRangeError", "from segments.reader import SegmentReader",
                "from logbroker.client import Client"):
        assert check("http_api.streams", bad), bad


def test_checker_keeps_the_queue_routes_on_the_front_door():
    assert check("http_api.queues", "from http_api.keys import FRONT_DOOR\nfrom logbroker.api import Answered\n") == []
    for bad in ("from http_api.keys import NODE", "from http_api.keys import FRONT_DOOR, NODE",
                "from logbroker.queues.manager import QueueManager", "from http_api.user_limits import long_poll",
                "from http_api import first_use"):
        assert check("http_api.queues", bad), bad


def test_checker_keeps_server_libraries_and_harnesses_out_of_what_a_client_installs():
    assert check("logbroker.client.core", "import grpc") and check("logbroker.client.sse", "from jwt import decode")
    assert check("segments.batch", "import msgspec") and check("logbroker.client", "import uvloop")
    assert check("logbroker.client.core", "import aiohttp, lz4.frame, zstandard") == []
    assert check("logbroker.node", "import grpc, msgspec") == []
    for module in ("logbroker.node", "spark_connector.reader", "grpc_api.server", "coordinator.etcd"):
        for bad in ("from benchmarks.stats import percentile", "import chaos.checker", "from tests import support"):
            assert check(module, bad), (module, bad)


def test_checker_keeps_grpc_api_off_the_http_layer_and_http_clients():
    assert check("grpc_api.groups", "import grpc\nfrom logbroker.cluster_groups import ensure_offsets_topic\n"
                                    "from logbroker.error_codes import answer_of\n") == []
    for bad in ("import aiohttp", "from aiohttp import ClientSession", "from aiohttp.http_exceptions import X",
                "from http_api.errors import STATUS_BY_CODE", "from http_api.tls import node_client_context",
                "from http_api import streams"):
        assert check("grpc_api.service", bad), bad


def test_checker_keeps_the_serve_exception_to_one_module():
    assert check(SERVE_COMMAND, "from http_api.server import serve") == []
    assert check(SERVE_COMMAND, "from http_api.app import build_app")
    assert check("logbroker.cli.admin", "from http_api.server import serve")
    assert check("logbroker.node", "from http_api.server import serve")
    assert check("logbroker.node", "from logbroker.client.core import Client")
    assert check("logbroker.node", "from logbroker.cli import main")
    assert check("logbroker.cli.admin", "from logbroker.client import Client\nfrom logbroker.errors import X") == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    imports = {"p": {"p.x.Thing"}, "p.x": {"p.y.f"}, "p.y": {"p.Thing", "q.z"}}
    assert import_graph(imports, "p") == {"p": {"p.x"}, "p.x": {"p.y"}, "p.y": {"p"}}
    assert cycles(import_graph(imports, "p")) == [["p", "p.x", "p.y", "p"]]


def test_a_type_only_import_of_the_node_is_a_circle():
    node = "from logbroker.ports import PeerTransport\nfrom logbroker.replication.manager import ReplicationManager\n"
    helper = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from logbroker.node import Node\n"
    narrow = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from logbroker.ports import PeerTransport\n"
    imports = {"logbroker.node": imported_names("logbroker.node", node), "logbroker.ports": set(),
               "logbroker.replication.manager": imported_names("logbroker.replication.manager", narrow)}
    assert cycles(import_graph(imports, "logbroker")) == []
    imports["logbroker.replication.manager"] = imported_names("logbroker.replication.manager", helper)
    assert cycles(import_graph(imports, "logbroker")) == [
        ["logbroker.node", "logbroker.replication.manager", "logbroker.node"]]


def test_a_helper_that_takes_the_node_again_is_a_circle():
    """A type-only import counts: a helper that names ``Node`` under ``TYPE_CHECKING`` closes a
    circle with the node that builds it, and the graph of the whole project shows it."""
    imports = dict(read_imports())
    assert not cycles(import_graph(imports, *PACKAGES))
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from logbroker.node import Node\n"
    for helper in ("logbroker.partition_moves", "logbroker.replication.manager", "logbroker.ports"):
        names = imports[helper] | imported_names(helper, source)
        found = cycles(import_graph({**imports, helper: names}, *PACKAGES))
        assert any("logbroker.node" in cycle and helper in cycle for cycle in found), (helper, found)
