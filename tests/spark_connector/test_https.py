"""The HTTP reader and the sink over HTTPS with a private CA (the ``caFile`` option), with a real
SparkSession and a real node that has a certificate: a partition of several megabytes (raw fetches
of several TLS chunks) is read back exactly; without ``caFile`` the node is not trusted."""

from __future__ import annotations

import random
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_api.sendfile import TLS_CHUNK_BYTES
from logbroker.certs import CA_CERT
from tests.spark_connector.conftest import collected_rows
from tests.support.http import Http
from tests.support.nodes import NodeProcess, make_certs, tls_args

TOPIC, COPY = "secure", "secure-copy"
REQUESTS, RECORDS_PER_REQUEST, VALUE_BYTES = 6, 64, 8192


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node") / "data"), *tls_args(certs)) as process:
        assert process.url.startswith("https://")
        yield process


def _reader(spark: Any, node: NodeProcess, topic: str, **options: str) -> Any:
    reader = spark.read.format("logbroker").option("topic", topic).option("url", node.url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_read_and_write_over_https_with_a_private_ca(spark, node, certs):
    ca_file = str(certs / CA_CERT)
    http = Http(node.url, tls=ssl.create_default_context(cafile=ca_file))
    http.json("POST", "/v1/topics", expect=201, body={"name": TOPIC, "partitions": 2})
    http.json("POST", "/v1/topics", expect=201, body={"name": COPY, "partitions": 2})
    rng = random.Random(7)
    expected: dict[tuple[int, int], bytes] = {}
    for request in range(REQUESTS):
        partition = 0 if request else 1  # partition 0 gets several megabytes
        values = [rng.randbytes(VALUE_BYTES // 2).hex() for _ in range(RECORDS_PER_REQUEST)]
        offsets = http.json("POST", f"/v1/topics/{TOPIC}/records", body={
            "records": [{"value": v, "partition": partition} for v in values]})["offsets"]
        expected.update({(o["partition"], o["offset"]): v.encode() for o, v in zip(offsets, values, strict=True)})
    assert sum(len(v) for (p, _), v in expected.items() if p == 0) > 2 * TLS_CHUNK_BYTES

    rows = collected_rows(_reader(spark, node, TOPIC, caFile=ca_file))
    assert {k: row[1] for k, row in rows.items()} == expected

    _reader(spark, node, TOPIC, caFile=ca_file).select("value", "partition").write.format("logbroker") \
        .option("topic", COPY).option("url", node.url).option("caFile", ca_file).mode("append").save()
    copied = collected_rows(_reader(spark, node, COPY, caFile=ca_file))
    for partition in (0, 1):
        assert sorted(row[1] for (p, _), row in copied.items() if p == partition) == \
            sorted(v for (p, _), v in expected.items() if p == partition)

    with pytest.raises(Exception, match=re.escape("CERTIFICATE_VERIFY_FAILED")):
        _reader(spark, node, TOPIC).collect()
    with pytest.raises(Exception, match=re.escape("cannot load the CA certificate")):
        _reader(spark, node, TOPIC, caFile=str(certs / "missing.pem")).collect()
