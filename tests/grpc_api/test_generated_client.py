"""A client generated from ``grpc_api/broker.proto`` by stock grpcio-tools, in a virtual environment
of its own that holds nothing of this project: it lists the service by server reflection,
publishes and subscribes with a token, and is refused without one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT
from tests.support.auth import bearer

PINS = ("grpcio==1.85.1", "grpcio-tools==1.85.1", "grpcio-reflection==1.85.1")
CLIENT = textwrap.dedent('''
    import json, sys
    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    import broker_pb2, broker_pb2_grpc

    address, token = sys.argv[1], sys.argv[2]
    out = {"project_importable": True}
    try:
        import logbroker  # noqa: F401
    except ImportError:
        out["project_importable"] = False
    with grpc.insecure_channel(address) as channel:
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        answer = next(reflect.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        out["services"] = [s.name for s in answer.list_services_response.service]
        stub = broker_pb2_grpc.BrokerStub(channel)
        metadata = (("authorization", "Bearer " + token),)
        published = stub.Publish(broker_pb2.PublishRequest(topic="grpc.stock", records=[
            broker_pb2.Record(key=b"k", value=b"from a stock client", headers={"h": b"1"}, partition=0)]),
            metadata=metadata, timeout=10)
        out["positions"] = [[p.partition, p.offset] for p in published.positions]
        stream = stub.Subscribe(broker_pb2.SubscribeRequest(topic="grpc.stock", partition=0, offset=0),
                                metadata=metadata, timeout=10)
        record = next(stream)
        stream.cancel()
        out["record"] = [record.offset, record.key.decode(), record.value.decode(), dict(record.headers)["h"].decode()]
        try:
            stub.Publish(broker_pb2.PublishRequest(topic="grpc.stock", records=[broker_pb2.Record(value=b"x")]),
                         timeout=10)
            out["without_token"] = "OK"
        except grpc.RpcError as exc:
            out["without_token"] = exc.code().name
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def stock_client(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """A virtual environment with stock grpcio-tools, and the stubs it generated from the .proto."""
    root = tmp_path_factory.mktemp("stock-client")
    venv, work = root / "venv", root / "client"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    shutil.copy(os.path.join(ROOT, "grpc_api", "broker.proto"), work / "broker.proto")
    generated = subprocess.run([python, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--grpc_python_out=.",
                                "broker.proto"], cwd=work, capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    (work / "client.py").write_text(CLIENT)
    yield python, str(work)


def test_a_stock_generated_client_publishes_subscribes_reflects_and_needs_a_token(stock_client, node, http,
                                                                                  admin_token):
    python, work = stock_client
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.stock", "partitions": 1}, headers=bearer(admin_token))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # nothing of this project on its path
    result = subprocess.run([python, "-s", "client.py", node.grpc_address, admin_token],
                            cwd=work, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["project_importable"] is False
    assert "logbroker.v1.Broker" in out["services"]
    assert out["positions"] == [[0, 0]]
    assert out["record"] == [0, "k", "from a stock client", "1"]
    assert out["without_token"] == "UNAUTHENTICATED"


def page_blocks(page: str) -> dict[str, str]:
    """The first ``sh`` and ``python`` code blocks of a page of the documentation site, as written."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    blocks: dict[str, str] = {}
    for language in ("sh", "python"):
        blocks[language] = text.split(f"```{language}\n", 1)[1].split("```", 1)[0]
    return blocks


def test_the_sites_grpc_example_runs_as_written(stock_client, node, http, admin_token, tmp_path):
    """The gRPC page's protoc line and client, with only the address and a token filled in: it
    publishes, then prints the record as the subscription delivers it."""
    python, _ = stock_client
    blocks = page_blocks("docs/api/grpc.md")
    protoc = next(line for line in blocks["sh"].splitlines() if "grpc_tools.protoc" in line).split()
    assert os.path.basename(protoc[0]) == "python" and protoc[1:3] == ["-m", "grpc_tools.protoc"]
    (tmp_path / "grpc_api").mkdir()
    shutil.copy(os.path.join(ROOT, "grpc_api", "broker.proto"), tmp_path / "grpc_api" / "broker.proto")
    generated = subprocess.run([python, *protoc[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    assert "127.0.0.1:9092" in blocks["python"]
    example = blocks["python"].replace("127.0.0.1:9092", node.grpc_address)
    (tmp_path / "example.py").write_text(example)
    # As `make run` suggests creating it: three partitions, so the key picks one.
    http.json("POST", "/v1/topics", 201, body={"name": "demo", "partitions": 3}, headers=bearer(admin_token))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"TOKEN": admin_token}
    process = subprocess.Popen([python, "-s", "-u", "example.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(30, process.kill)  # an example that never prints ends the reads, not the run
    watchdog.start()
    try:
        lines = [process.stdout.readline() for _ in range(2)]  # type: ignore[union-attr]
    finally:
        watchdog.cancel()
        process.kill()
        _, errors = process.communicate(timeout=30)
    assert lines[0].strip() in ("[(0, 0)]", "[(1, 0)]", "[(2, 0)]"), (lines, errors)
    assert lines[1].split() == ["0", "b'k'", "b'hello'"], (lines, errors)
