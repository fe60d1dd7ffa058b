"""A cluster's replica opened after an unclean shutdown is marked (``Replica.unclean_start``), so
that it leaves the ISR before it may stand (decision 0385): a log that existed and has no
clean-shutdown mark, or one that ends below the high watermark checkpointed for it (its files
were lost). A new log, a cleanly closed one, and a single node's are not marked."""

from __future__ import annotations

import shutil

import pytest

from coordinator.models import TopicMetadata
from logbroker.replica_manager import ReplicaManager
from segments.batch import encode_values
from segments.config import LogConfig

META = TopicMetadata("t", "id-1", 2, 3, "topic", {}, None, 0)


async def opened(data_dir: str, *, cluster: bool = True) -> ReplicaManager:
    replicas = ReplicaManager(data_dir, flush_threads=1, waiters_max=10)
    replicas.load_checkpoints()
    await replicas.open_topic(META, LogConfig(flush="interval"), [0, 1] if cluster else None)
    return replicas


@pytest.mark.asyncio
async def test_only_a_log_left_without_a_clean_close_is_marked(tmp_path):
    first = await opened(str(tmp_path))
    assert [first.get("t", p).unclean_start for p in (0, 1)] == [False, False], "new logs hold nothing to lose"
    first.get("t", 0).log.append(encode_values([b"a"]), leader_epoch=1)
    await first.close()

    second = await opened(str(tmp_path))
    assert [second.get("t", p).unclean_start for p in (0, 1)] == [False, False], "closed cleanly"
    second.get("t", 0).log.append(encode_values([b"b"]), leader_epoch=1)
    crashed = second  # never closed: no clean-shutdown mark is written

    third = await opened(str(tmp_path))
    assert [third.get("t", p).unclean_start for p in (0, 1)] == [True, True]
    await third.close()
    await crashed.close()

    single = await opened(str(tmp_path / "single"), cluster=False)
    single.get("t", 0).log.append(encode_values([b"c"]), leader_epoch=1)
    alone = await opened(str(tmp_path / "single"), cluster=False)
    assert not alone.get("t", 0).unclean_start, "a single node's replica has no ISR to leave"
    await alone.close()
    await single.close()


@pytest.mark.asyncio
async def test_a_log_whose_files_were_lost_is_marked_by_its_checkpointed_high_watermark(tmp_path):
    first = await opened(str(tmp_path))
    replica = first.get("t", 0)
    replica.log.append(encode_values([b"a", b"b"]), leader_epoch=1)
    replica.advance(2)
    await first.close()  # a clean close: the high watermark 2 is checkpointed
    shutil.rmtree(replica.log.directory)  # a replaced disk, a directory lost to a crash

    again = await opened(str(tmp_path))
    assert again.get("t", 0).log.log_end_offset == 0
    assert again.get("t", 0).unclean_start, "it held records it no longer has"
    assert not again.get("t", 1).unclean_start
    await again.close()
