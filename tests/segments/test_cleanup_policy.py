"""``cleanup_policy`` on a real log: ``delete`` lets retention remove old segments; ``compact``
turns retention off whatever it was given; ``compact,delete`` keeps both (decision 0321)."""

from __future__ import annotations

from pathlib import Path

import pytest

from segments.config import NO_LIMIT, LogConfig
from segments.errors import InvalidArgumentError
from segments.log import PartitionLog
from tests.segments.helpers import batch_of

SMALL_SEGMENTS = {"segment_bytes": 1024, "retention_bytes": 1, "retention_ms": 1, "flush": "never"}


def _fill_and_retain(path: str, config: LogConfig) -> tuple[int, int]:
    """Append enough for many segments (all past retention by size and time); return
    (segments deleted by retention, the log start offset after it)."""
    with PartitionLog.open(path, config, clock_ms=lambda: 10_000_000) as log:
        for i in range(60):
            log.append(batch_of([b"x" * 50], timestamp=1000 + i), leader_epoch=0)
        assert log.segment_count > 2
        return log.apply_retention(), log.log_start_offset


def test_delete_applies_retention(tmp_path: Path) -> None:
    config = LogConfig.from_mapping({**SMALL_SEGMENTS, "cleanup_policy": "delete"})
    assert (config.retention_ms, config.retention_bytes) == (1, 1)
    deleted, start = _fill_and_retain(str(tmp_path / "d-0"), config)
    assert deleted > 0 and start > 0


def test_compact_turns_retention_off(tmp_path: Path) -> None:
    config = LogConfig.from_mapping({**SMALL_SEGMENTS, "cleanup_policy": "compact"})
    assert (config.retention_ms, config.retention_bytes) == (NO_LIMIT, NO_LIMIT)
    assert LogConfig(cleanup_policy="compact").to_mapping()["retention_ms"] == NO_LIMIT
    assert _fill_and_retain(str(tmp_path / "c-0"), config) == (0, 0)


def test_compact_and_delete_keeps_retention(tmp_path: Path) -> None:
    config = LogConfig.from_mapping({**SMALL_SEGMENTS, "cleanup_policy": "delete,compact"})
    assert config.cleanup_policy == "compact,delete" and (config.retention_ms, config.retention_bytes) == (1, 1)
    deleted, start = _fill_and_retain(str(tmp_path / "cd-0"), config)
    assert deleted > 0 and start > 0


@pytest.mark.parametrize("policy", ["compact,delete,compact", "Compact", "compact, delete", ""])
def test_unknown_policy_is_refused(policy: str) -> None:
    with pytest.raises(InvalidArgumentError, match="cleanup_policy"):
        LogConfig.from_mapping({"cleanup_policy": policy})
