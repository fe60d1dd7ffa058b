"""Per-log configuration: one frozen value, units last in every name.

``LogConfig.from_mapping`` is how topic configuration (strings or numbers from JSON/TOML) becomes
a validated config; unknown keys and out-of-range values raise ``InvalidArgumentError``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from segments.batch import HEADER_SIZE
from segments.errors import InvalidArgumentError

FlushPolicy = Literal["always", "interval", "never"]
CleanupPolicy = Literal["delete", "compact", "compact,delete"]
CLEANUP_POLICIES: Final = ("delete", "compact", "compact,delete")

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB
DAY_MS: Final = 24 * 3600 * 1000
# Positions in the offset index are u32, so a segment must stay below 4 GiB; 2 GiB like Kafka.
SEGMENT_BYTES_MAX: Final = 2 * GIB - 1
NO_LIMIT: Final = -1
CONFIG_INT: Final = re.compile(r"-?[0-9]{1,19}", re.ASCII)
CONFIG_FLOAT: Final = re.compile(r"-?[0-9]{1,19}(\.[0-9]{1,19})?", re.ASCII)
# What a config string may carry around its number: ``str.strip`` would also drop control characters
# such as U+001F, which ``int`` and ``float`` then refuse.
ASCII_SPACE: Final = " \t\n\r\f\v"


@dataclasses.dataclass(frozen=True, slots=True)
class LogConfig:
    """``cleanup_policy`` says what removes old records. ``delete``: retention deletes whole closed
    segments past ``retention_ms``/``retention_bytes``. ``compact``: the log is compacted by key
    (``segments.compaction``; internal logs by their owner's snapshots instead, decision 0143)
    and retention never deletes anything, so both retention settings read as ``NO_LIMIT``
    whatever was given. ``compact,delete`` (``delete,compact`` is the same): both (decision 0321).
    The ``*_compaction_*``, ``min_cleanable_dirty_ratio`` and ``delete_retention_ms`` settings
    decide when a compacted log is compacted and how long its tombstones stay."""

    segment_bytes: int = GIB
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * MIB
    index_interval_bytes: int = 4 * KIB
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = NO_LIMIT
    cleanup_policy: CleanupPolicy = "delete"
    flush: FlushPolicy = "interval"
    flush_ms: int = 1000
    max_batch_bytes: int = 8 * MIB
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**62
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = DAY_MS

    def __post_init__(self) -> None:
        _check_range("segment_bytes", self.segment_bytes, HEADER_SIZE, SEGMENT_BYTES_MAX)
        _check_range("segment_ms", self.segment_ms, 1, 2**62)
        _check_range("segment_index_bytes", self.segment_index_bytes, 12, 2**31)
        _check_range("index_interval_bytes", self.index_interval_bytes, 0, 2**31)
        _check_range("retention_ms", self.retention_ms, NO_LIMIT, 2**62)
        _check_range("retention_bytes", self.retention_bytes, NO_LIMIT, 2**62)
        _check_range("flush_ms", self.flush_ms, 1, 2**62)
        _check_range("max_batch_bytes", self.max_batch_bytes, HEADER_SIZE, SEGMENT_BYTES_MAX)
        _check_range("min_compaction_lag_ms", self.min_compaction_lag_ms, 0, 2**62)
        _check_range("max_compaction_lag_ms", self.max_compaction_lag_ms, 1, 2**62)
        _check_range("delete_retention_ms", self.delete_retention_ms, 0, 2**62)
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise InvalidArgumentError(f"min_cleanable_dirty_ratio must be a number in [0, 1], not {ratio!r}")
        object.__setattr__(self, "min_cleanable_dirty_ratio", float(ratio))
        policy: str = self.cleanup_policy
        if policy == "delete,compact":
            object.__setattr__(self, "cleanup_policy", "compact,delete")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise InvalidArgumentError("cleanup_policy must be delete, compact or compact,delete, "
                                       f"not {self.cleanup_policy!r}")
        if self.cleanup_policy == "compact":
            object.__setattr__(self, "retention_ms", NO_LIMIT)
            object.__setattr__(self, "retention_bytes", NO_LIMIT)
        if self.flush not in ("always", "interval", "never"):
            raise InvalidArgumentError(f"flush must be always, interval or never, not {self.flush!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build a config from user-supplied keys over ``base`` (defaults when None)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for key, raw in values.items():
            if key not in fields:
                raise InvalidArgumentError(f"unknown log config key {key!r}")
            if fields[key].type in ("int",):
                changes[key] = config_int(key, raw)
            elif fields[key].type in ("float",):
                changes[key] = config_float(key, raw)
            else:
                if not isinstance(raw, str):
                    raise InvalidArgumentError(f"{key} must be a string")
                changes[key] = raw
        return dataclasses.replace(base or cls(), **changes)

    def to_mapping(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def compacts(self) -> bool:
        """True when the log is compacted by key (``compact`` or ``compact,delete``)."""
        return self.cleanup_policy != "delete"

    @property
    def deletes(self) -> bool:
        """True when retention deletes old segments (``delete`` or ``compact,delete``)."""
        return self.cleanup_policy != "compact"


def config_float(key: str, raw: object) -> float:
    """A fractional config value: a JSON number or a decimal string."""
    if isinstance(raw, bool):
        raise InvalidArgumentError(f"{key} must be a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str) and CONFIG_FLOAT.fullmatch(text := raw.strip(ASCII_SPACE)):
        return float(text)
    raise InvalidArgumentError(f"{key} must be a number, not {raw[:40] if isinstance(raw, str) else raw!r}")


def config_int(key: str, raw: object) -> int:
    """An integer config value as a user may give it: a JSON number or a string of ASCII digits
    (``str.isdigit`` would also take other scripts' digits, some of which ``int`` refuses)."""
    if isinstance(raw, bool):
        raise InvalidArgumentError(f"{key} must be an integer")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and CONFIG_INT.fullmatch(text := raw.strip(ASCII_SPACE)):
        return int(text)
    raise InvalidArgumentError(f"{key} must be an integer, not {raw[:40] if isinstance(raw, str) else raw!r}")


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an integer in [{low}, {high}], not {value!r}")
