"""``kill -9`` during compaction at every step of the swap protocol: the partition directory is
copied as a killed process would leave it before each fsync, rename, replace and unlink the pass
makes, and each copy, opened again, holds every latest value, every kept record at its offset,
no record twice, and no compaction directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import segments.cleaner_files as cleaner_files
from segments.cleaner import compact
from segments.config import LogConfig
from segments.errors import StorageError
from segments.log import PartitionLog
from tests.conftest import ROOT
from tests.segments.compaction_helpers import keyed_batch, latest_values, read_records

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=0, flush="never", cleanup_policy="compact",
                   delete_retention_ms=0)


def _fill(directory: str) -> PartitionLog:
    log = PartitionLog.open(directory, CONFIG, clock_ms=lambda: 10_000)
    for i in range(40):
        log.append(keyed_batch([(b"k%d" % (i % 4), b"v%d" % i), (b"t%d" % (i % 2), None if i > 30 else b"x")],
                               timestamp=100 + i), leader_epoch=0)
    log.roll()
    log.append(keyed_batch([(b"k0", b"last")], timestamp=500), leader_epoch=0)
    log.flush()
    return log


def reopened_whole(reopened: PartitionLog, written: dict, before: list, label: object) -> list:
    """The records of a log reopened after an interrupted pass, checked: no offset twice, each
    record as written, every key's latest value kept, the log end unchanged."""
    records = read_records(reopened)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), label
    assert all(written[r.offset] == r for r in records), label
    assert latest_values(records) == latest_values(before), label
    assert reopened.log_end_offset == before[-1].offset + 1, label
    return records


def test_kill_at_every_step_of_a_compaction_loses_nothing_and_duplicates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = str(tmp_path / "p")
    log = _fill(directory)
    before = read_records(log)
    written = {r.offset: r for r in before}
    snapshots: list[str] = []

    def snapshot() -> None:
        target = str(tmp_path / f"crash-{len(snapshots)}")
        shutil.copytree(directory, target)
        snapshots.append(target)

    def crashing(call: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            snapshot()
            return call(*args, **kwargs)
        return step

    fake_os = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
    for name in ("rename", "replace", "unlink"):
        setattr(fake_os, name, crashing(getattr(os, name)))
    monkeypatch.setattr(cleaner_files, "os", fake_os)
    result = compact(log, now_ms=10_000, fsync=crashing(os.fsync))
    monkeypatch.undo()
    assert result is not None and result.swapped and result.records_removed > 0
    after = read_records(log)
    log.close()
    assert len(snapshots) >= 10
    for path in [*snapshots, directory]:
        reopened = PartitionLog.open(path, CONFIG)
        records = reopened_whole(reopened, written, before, path)
        assert records in (before, after) or len(after) <= len(records) <= len(before), path
        assert not {"compaction.cleaning", "compaction.swap"} & set(os.listdir(path)), path
        reopened.close()


@pytest.mark.parametrize("fail_at", ["commit", "finish"])
def test_a_failed_swap_in_process_is_finished_or_discarded_on_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str) -> None:
    directory = str(tmp_path / "p")
    log = _fill(directory)
    before = read_records(log)
    import segments.log_cleaning as swap_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("injected")

    monkeypatch.setattr(swap_module, "swap_dir_commit" if fail_at == "commit" else "move_swapped_files", broken)
    with pytest.raises((OSError, StorageError)):
        compact(log, now_ms=10_000)
    monkeypatch.undo()
    assert (log.offline_reason is None) == (fail_at == "commit")
    log.close()
    reopened = PartitionLog.open(directory, CONFIG)
    assert latest_values(read_records(reopened)) == latest_values(before)
    assert not {"compaction.cleaning", "compaction.swap"} & set(os.listdir(directory))
    reopened.close()


STEPS_MAX = 200


def test_a_process_killed_at_every_step_of_a_compaction_reopens_whole(tmp_path: Path) -> None:
    """A real ``kill -9`` (SIGKILL) at the first, second, ... file operation of a pass, until a
    run finishes the pass: each time the log, opened again, holds every latest value at its
    offset, once, and no compaction directory."""
    reference = _fill(str(tmp_path / "ref"))
    before = read_records(reference)
    reference.close()
    written = {r.offset: r for r in before}
    for step in range(1, STEPS_MAX):
        directory = str(tmp_path / f"p{step}")
        proc = subprocess.run([sys.executable, "-m", "tests.segments.compaction_killer", directory, str(step)],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        reopened = PartitionLog.open(directory, CONFIG)
        records = reopened_whole(reopened, written, before, step)
        assert not {"compaction.cleaning", "compaction.swap"} & set(os.listdir(directory)), step
        reopened.close()
        if proc.returncode == 0:
            assert step > 10 and len(records) < len(before)  # the pass ran to its end
            return
    raise AssertionError(f"the pass never finished within {STEPS_MAX} steps")
