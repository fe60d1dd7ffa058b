"""A Hypothesis state machine: the partition log against a plain list of batches.

Rules append, read, roll, truncate, apply retention, close-and-reopen and crash-and-reopen (the
files copied while the log is open, as a killed process leaves them), over a matrix of small
segment and index sizes so that rolls, full indexes and multi-segment reads happen constantly.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from segments.config import LogConfig
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all

CONFIGS = [
    LogConfig(segment_bytes=300, index_interval_bytes=0, segment_index_bytes=48, flush="never", retention_ms=-1),
    LogConfig(segment_bytes=2000, index_interval_bytes=150, flush="never", retention_ms=-1),
    LogConfig(segment_bytes=100_000, index_interval_bytes=4096, flush="always", retention_ms=-1),
]


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="logmodel-")
        self.generation = 0
        self.batches: list[tuple[int, list[bytes]]] = []  # (base_offset, values), in order
        self.start = 0
        self.epoch = 0
        self.log: PartitionLog | None = None

    @initialize(config=st.sampled_from(CONFIGS))
    def open_log(self, config: LogConfig) -> None:
        self.config = config
        self.log = PartitionLog.open(self._path(), config)

    def _path(self) -> str:
        return f"{self.root}/t-{self.generation}"

    @property
    def end(self) -> int:
        if not self.batches:
            return self.start
        base, values = self.batches[-1]
        return base + len(values)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(values=st.lists(st.binary(min_size=0, max_size=60), min_size=1, max_size=6), bump=st.booleans())
    def append(self, values: list[bytes], bump: bool) -> None:
        assert self.log is not None
        self.epoch += int(bump)
        info = self.log.append(batch_of(values, timestamp=1000 + self.end), leader_epoch=self.epoch)
        assert info.base_offset == self.end
        self.batches.append((info.base_offset, values))

    @rule(data=st.data(), size=st.integers(min_value=0, max_value=3000))
    def read(self, data: st.DataObject, size: int) -> None:
        assert self.log is not None
        offset = data.draw(st.integers(min_value=self.start, max_value=self.end))
        result = self.log.read(offset, size)
        if offset == self.end:
            assert len(result.data) == 0
            return
        first = next(b for b, v in self.batches if b + len(v) > offset)
        assert result.first_offset == first and result.next_offset > offset

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.log is not None
        offset = data.draw(st.integers(min_value=self.start, max_value=self.end + 2))
        new_end = self.log.truncate_to(offset)
        if offset >= self.end:
            assert new_end == self.end
            return
        if offset <= self.start:
            self.batches, self.start = [], offset
        else:
            self.batches = [(b, v) for b, v in self.batches if b + len(v) - 1 < offset]
        assert new_end == self.end

    @rule(keep_bytes=st.integers(min_value=0, max_value=3000))
    def retention(self, keep_bytes: int) -> None:
        assert self.log is not None
        self.log.close()
        self.log = PartitionLog.open(self._path(), LogConfig.from_mapping({"retention_bytes": keep_bytes}, self.config))
        self.log.apply_retention()
        new_start = self.log.log_start_offset
        assert new_start >= self.start
        if new_start != self.start:
            assert any(b == new_start for b, _ in self.batches) or new_start == self.end
            self.batches = [(b, v) for b, v in self.batches if b >= new_start]
            self.start = new_start

    @rule()
    def reopen_clean(self) -> None:
        assert self.log is not None
        self.log.close()
        self.log = PartitionLog.open(self._path(), self.config)
        assert self.log.recovery is not None and self.log.recovery.clean_shutdown

    @precondition(lambda self: self.log is not None)
    @rule()
    def crash_and_reopen(self) -> None:
        assert self.log is not None
        old = self._path()
        self.generation += 1
        shutil.copytree(old, self._path())
        self.log.close()
        shutil.rmtree(old)
        self.log = PartitionLog.open(self._path(), self.config)
        assert self.log.recovery is not None and not self.log.recovery.clean_shutdown
        assert self.log.recovery.truncated_bytes == 0 and not self.log.recovery.errors

    @invariant()
    def matches_model(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        expected = [(b + i, v) for b, values in self.batches for i, v in enumerate(values)]
        assert read_all(self.log) == expected


EXAMPLES = int(os.environ.get("LOG_MODEL_EXAMPLES", "60"))
LogModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase
