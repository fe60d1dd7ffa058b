"""Reading a node's Prometheus scrape in tests: one series' value, and the HTTP request counter."""

from __future__ import annotations

import re
from typing import Any


def scrape(http: Any, headers: dict[str, str] | None = None) -> str:
    """The node's ``/metrics`` text (``http``: a ``tests.support.http.Http``)."""
    reply = http.call("GET", "/metrics", headers=headers) if headers else http.call("GET", "/metrics")
    assert reply.status == 200, reply.status
    return str(reply.data.decode())


def value(text: str, name: str, labels: str = "") -> float:
    """The value of the series ``name{labels}`` (labels as the scrape writes them); it must exist."""
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE)
    assert found, f"no {name}{labels} in the scrape"
    return float(found.group(1))


def requests_total(http: Any, method: str, route: str, status: int, headers: dict[str, str] | None = None) -> float:
    """``logbroker_http_requests_total`` of one method, route and status (0 before the first)."""
    series = f'logbroker_http_requests_total{{method="{method}",route="{route}",status="{status}"}} '
    return sum(float(row[len(series):]) for row in scrape(http, headers).splitlines() if row.startswith(series))
