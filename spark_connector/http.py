"""A small blocking HTTP client for Spark tasks (which run plain Python, no event loop).

One keep-alive connection per instance; every request has a timeout; retriable failures (transport
errors, 429/502/503/504) are retried a bounded number of times with a growing pause. A bearer
``token`` goes in an ``Authorization: Bearer`` header on every request; with ``username`` and
``password`` instead, the client gets a token from ``POST /v1/auth/token`` when it first needs one,
renews it before it expires and once more when the node answers 401 (a long streaming query
outlives any one token). Over HTTPS the node's certificate is checked against the system's CAs, or
against ``ca_file`` alone when given (a private CA, such as ``logbroker certs`` makes).
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.parse
from typing import Any, Final

from spark_connector.errors import ConnectorError
from spark_connector.options import Location

BATCH_TYPE: Final = "application/vnd.logbroker.batch"
RETRIABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
ATTEMPTS_MAX: Final = 5
RETRY_PAUSE_S: Final = 0.1
NEXT_OFFSET: Final = "X-LogBroker-Next-Offset"
HIGH_WATERMARK: Final = "X-LogBroker-High-Watermark"
ERROR_BODY_CHARS_MAX: Final = 500
UNAUTHORIZED: Final = 401
LOGIN_PATH: Final = "/v1/auth/token"
TOKEN_REFRESH_MARGIN_S: Final = 60.0


class HttpError(ConnectorError):
    """A non-success answer; ``problem`` is the problem+json body when there was one."""

    def __init__(self, method: str, path: str, status: int, problem: dict[str, Any]) -> None:
        detail = problem.get("detail") or problem.get("title") or ""
        super().__init__(f"{method} {path}: {status} {problem.get('code', '')} {detail}".rstrip())
        self.status = status
        self.problem = problem


class HttpClient:
    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 60.0,
                 username: str | None = None, password: str | None = None, ca_file: str | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConnectorError(f"not an http(s) URL: {url!r}")
        self.url = url
        self._scheme, self._host, self._port = parsed.scheme, parsed.hostname, parsed.port
        self._prefix = parsed.path.rstrip("/")
        if (username is None) != (password is None) or (token and username):
            raise ConnectorError("give a token, or a username with a password (not both)")
        self._token = token
        self._login = (username, password) if username is not None and password is not None else None
        self._token_expires_at = 0.0
        self._timeout_s = timeout_s
        self._tls: ssl.SSLContext | None = None
        if ca_file is not None:
            if self._scheme != "https":
                raise ConnectorError(f"a CA file is for an https:// URL, not {url!r}")
            try:
                self._tls = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConnectorError(f"cannot load the CA certificate {ca_file!r} (caFile): {exc}") from exc
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
            if self._scheme == "https":
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s,
                                                         context=self._tls)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        return self._conn

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """Send one request (retrying retriable failures); raise ``HttpError`` on status >= 400."""
        target = self._prefix + path + ("?" + urllib.parse.urlencode(params) if params else "")
        renewed = False
        for attempt in range(ATTEMPTS_MAX):
            last = attempt == ATTEMPTS_MAX - 1
            all_headers = {**self._auth_header(path), **(headers or {})}
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
            if response.status == UNAUTHORIZED and self._login is not None and not renewed and not last:
                self._token_expires_at, renewed = 0.0, True  # the token expired or keys rotated: log in again
                continue
            if response.status >= 400:
                raise HttpError(method, path, response.status, _problem(data))
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        raise AssertionError("unreachable")

    def _auth_header(self, path: str) -> dict[str, str]:
        if self._login is not None and path != LOGIN_PATH and time.monotonic() >= self._token_expires_at:
            username, password = self._login
            body = json.dumps({"username": username, "password": password}).encode()
            answer = self.json("POST", LOGIN_PATH, body=body, headers={"Content-Type": "application/json"})
            self._token = str(answer["access_token"])
            lifetime = float(answer["expires_in"])
            self._token_expires_at = time.monotonic() + lifetime - min(TOKEN_REFRESH_MARGIN_S, lifetime / 5)
        return {"Authorization": f"Bearer {self._token}"} if self._token and path != LOGIN_PATH else {}

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


def client_for(location: Location) -> HttpClient:
    """A client for the node and credentials of a ``url=`` location."""
    return HttpClient(location.url, token=location.token, timeout_s=location.timeout_s,
                      username=location.username, password=location.password, ca_file=location.ca_file)


def _problem(data: bytes) -> dict[str, Any]:
    try:
        problem = json.loads(data)
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        return problem
    return {"detail": data[:ERROR_BODY_CHARS_MAX].decode(errors="replace")}
