"""The Kafka page's table of APIs and versions is the table ApiVersions advertises."""

from __future__ import annotations

import os
import re

from kafka_api import entities
from kafka_api.apis import APIS
from tests.conftest import ROOT


def test_the_docs_list_exactly_the_served_apis_and_versions() -> None:
    with open(os.path.join(ROOT, "docs", "api", "kafka.md"), encoding="utf-8") as f:
        page = f.read()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)\u2013(\d+) \|$", page, re.MULTILINE)
    assert rows, "docs/api/kafka.md has no table of APIs and versions"
    listed = {(int(key), name, int(low), int(high)) for key, name, low, high in rows}
    served = {(api.key, entities.request_class(api.key, api.max_version).__name__.removesuffix("Request"),
               api.min_version, api.max_version) for api in APIS}
    assert listed == served
