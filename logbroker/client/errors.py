"""The client's error: an error answer of the broker (problem+json) or a transport failure."""

from __future__ import annotations

import json
from typing import Any, Final

RETRIABLE_STATUSES: Final = frozenset({429, 502, 503, 504})


class LogBrokerError(Exception):
    """An error answer from the broker (problem+json), or a transport failure (status 0)."""

    def __init__(self, status: int, code: str, detail: str, *, retriable: bool = False,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.retriable = status, code, detail, retriable
        self.extra = extra or {}


def problem_error(status: int, body: bytes) -> LogBrokerError:
    try:
        problem = json.loads(body)
        return LogBrokerError(status, problem.get("code", "error"), problem.get("detail", ""),
                              retriable=bool(problem.get("retriable")) or status in RETRIABLE_STATUSES,
                              extra=problem)
    except ValueError:
        return LogBrokerError(status, "error", body[:200].decode(errors="replace"),
                              retriable=status in RETRIABLE_STATUSES)
