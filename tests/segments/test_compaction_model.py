"""A Hypothesis state machine: a compacted partition log against a dict of key to latest value.

Rules write keyed records and tombstones (single and multi-record batches), roll, compact at a
clock that moves past ``delete_retention_ms``, reopen cleanly and crash (the files copied while the
log is open, as a killed process leaves them). Invariants: the log's key -> latest value equals
the model's; every record read is exactly the record written at its offset (offsets never move);
the end offset never changes but by appends, and the last record written is always readable.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from segments.cleaner import compact
from segments.config import LogConfig
from segments.log import PartitionLog
from tests.segments.compaction_helpers import keyed_batch, latest_values, read_records

CONFIGS = [
    LogConfig(segment_bytes=300, index_interval_bytes=0, segment_index_bytes=48, flush="never",
              cleanup_policy="compact", delete_retention_ms=50),
    LogConfig(segment_bytes=1000, index_interval_bytes=100, flush="never", cleanup_policy="compact",
              delete_retention_ms=50),
]
KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
ROW = st.tuples(KEYS, st.one_of(st.none(), st.binary(min_size=0, max_size=20)))


class CompactedLogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="compactmodel-")
        self.generation = 0
        self.clock = [1000]
        self.state: dict[bytes, bytes] = {}
        self.written: dict[int, tuple[bytes, bytes | None]] = {}
        self.end = 0
        self.log: PartitionLog | None = None

    @initialize(config=st.sampled_from(CONFIGS))
    def open_log(self, config: LogConfig) -> None:
        self.config = config
        self.log = self._open()

    def _open(self) -> PartitionLog:
        return PartitionLog.open(f"{self.root}/t-{self.generation}", self.config, clock_ms=lambda: self.clock[0])

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(rows=st.lists(ROW, min_size=1, max_size=5))
    def write(self, rows: list[tuple[bytes, bytes | None]]) -> None:
        assert self.log is not None
        info = self.log.append(keyed_batch(rows, timestamp=self.clock[0]), leader_epoch=0)
        assert info.base_offset == self.end
        for i, (key, value) in enumerate(rows):
            self.written[self.end + i] = (key, value)
            if value is None:
                self.state.pop(key, None)
            else:
                self.state[key] = value
        self.end += len(rows)

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        self.log.roll()

    @rule(advance=st.integers(min_value=0, max_value=100))
    def compact(self, advance: int) -> None:
        assert self.log is not None
        self.clock[0] += advance
        self.log.flush()
        compact(self.log, now_ms=self.clock[0], keys_max=3)

    @rule()
    def reopen_clean(self) -> None:
        assert self.log is not None
        self.log.close()
        self.log = self._open()
        assert self.log.recovery is not None and self.log.recovery.clean_shutdown

    @rule()
    def crash_and_reopen(self) -> None:
        assert self.log is not None
        old = f"{self.root}/t-{self.generation}"
        self.generation += 1
        shutil.copytree(old, f"{self.root}/t-{self.generation}")
        self.log.close()
        shutil.rmtree(old)
        self.log = self._open()
        assert self.log.recovery is not None and not self.log.recovery.errors

    @invariant()
    def matches_model(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.end
        records = read_records(self.log)
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        for record in records:
            assert self.written[record.offset] == (record.key, record.value)
        assert latest_values(records) == self.state
        # The last record written is never compacted away: no gap ends the log.
        assert self.end == 0 or offsets[-1:] == [self.end - 1]
        directory = self.log.directory
        assert not {"compaction.cleaning", "compaction.swap"} & set(os.listdir(directory))


EXAMPLES = int(os.environ.get("COMPACTION_MODEL_EXAMPLES", "60"))
CompactedLogModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None)
TestCompactedLogModel = CompactedLogModel.TestCase
