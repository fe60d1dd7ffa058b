"""A small blocking HTTP client for Spark tasks (which run plain Python, no event loop).

One keep-alive connection per instance; every request has a timeout; retriable failures (transport
errors, 429/502/503/504) are retried a bounded number of times with a growing pause. A bearer
``token``, when given, goes in an ``Authorization: Bearer`` header on every request, so reads and
writes work unchanged once the node checks tokens.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import Any, Final

from spark_connector.errors import ConnectorError

BATCH_TYPE: Final = "application/vnd.logbroker.batch"
RETRIABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
ATTEMPTS_MAX: Final = 5
RETRY_PAUSE_S: Final = 0.1
NEXT_OFFSET: Final = "X-LogBroker-Next-Offset"
HIGH_WATERMARK: Final = "X-LogBroker-High-Watermark"
ERROR_BODY_CHARS_MAX: Final = 500


class HttpError(ConnectorError):
    """A non-success answer; ``problem`` is the problem+json body when there was one."""

    def __init__(self, method: str, path: str, status: int, problem: dict[str, Any]) -> None:
        detail = problem.get("detail") or problem.get("title") or ""
        super().__init__(f"{method} {path}: {status} {problem.get('code', '')} {detail}".rstrip())
        self.status = status
        self.problem = problem


class HttpClient:
    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 60.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConnectorError(f"not an http(s) URL: {url!r}")
        self.url = url
        self._scheme, self._host, self._port = parsed.scheme, parsed.hostname, parsed.port
        self._prefix = parsed.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout_s)
        return self._conn

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """Send one request (retrying retriable failures); raise ``HttpError`` on status >= 400."""
        target = self._prefix + path + ("?" + urllib.parse.urlencode(params) if params else "")
        all_headers = {**self._headers, **(headers or {})}
        for attempt in range(ATTEMPTS_MAX):
            last = attempt == ATTEMPTS_MAX - 1
            try:
                conn = self._connection()
                conn.request(method, target, body=body, headers=all_headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if last:
                    raise ConnectorError(f"{method} {self.url}{path}: {exc!r} (after {ATTEMPTS_MAX} attempts)") from exc
                time.sleep(RETRY_PAUSE_S * (2 ** attempt))
                continue
            if response.status in RETRIABLE_STATUSES and not last:
                time.sleep(RETRY_PAUSE_S * (2 ** attempt))
                continue
            if response.status >= 400:
                raise HttpError(method, path, response.status, _problem(data))
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        _, _, data = self.request(method, path, **kwargs)
        return json.loads(data) if data else None

    def fetch_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Raw batches from ``offset``: ``(bytes, next offset, high watermark)``."""
        _, headers, data = self.request(
            "GET", f"/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": max_bytes}, headers={"Accept": BATCH_TYPE})
        return data, int(headers[NEXT_OFFSET.lower()]), int(headers[HIGH_WATERMARK.lower()])

    def produce_batch(self, topic: str, partition: int, batch: bytes, acks: str) -> int:
        """Append one prebuilt batch; returns its base offset."""
        result = self.json("POST", f"/v1/topics/{topic}/records", params={"partition": partition, "acks": acks},
                           body=batch, headers={"Content-Type": BATCH_TYPE})
        return int(result["offsets"][0]["offset"])


def _problem(data: bytes) -> dict[str, Any]:
    try:
        problem = json.loads(data)
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        return problem
    return {"detail": data[:ERROR_BODY_CHARS_MAX].decode(errors="replace")}
