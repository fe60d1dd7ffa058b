"""A partition directory records the id of the topic it belongs to: a directory left by an older
topic of the same name is removed when the new topic opens, never served as its data; a
directory from before ids were recorded is claimed; stray directories are removed on request."""

from __future__ import annotations

import dataclasses
import os

import pytest

from coordinator.models import TopicMetadata
from logbroker.replica_manager import TOPIC_ID_FILE, ReplicaManager
from segments.batch import encode_values
from segments.config import LogConfig

OLD = TopicMetadata("t", "old-id", 1, 1, "topic", {}, None, 0)
NEW = dataclasses.replace(OLD, topic_id="new-id")


async def opened(data_dir: str, meta: TopicMetadata) -> ReplicaManager:
    replicas = ReplicaManager(data_dir, flush_threads=1, waiters_max=10)
    replicas.load_checkpoints()
    await replicas.open_topic(meta, LogConfig())
    return replicas


@pytest.mark.asyncio
async def test_an_older_topics_directory_is_not_served_to_a_new_topic_of_that_name(tmp_path):
    replicas = await opened(str(tmp_path), OLD)
    replica = replicas.get("t", 0)
    await replica.commit(replica.append(encode_values([b"old secret"])))
    await replicas.close()
    with open(tmp_path / "t-0" / TOPIC_ID_FILE) as f:
        assert f.read() == "old-id"

    again = await opened(str(tmp_path), OLD)  # the same topic keeps its data
    assert again.get("t", 0).log.log_end_offset == 1
    await again.close()

    new = await opened(str(tmp_path), NEW)
    assert new.get("t", 0).log.log_end_offset == 0
    assert new.get("t", 0).log.read(0, 1 << 20).data.nbytes == 0
    await new.close()
    with open(tmp_path / "t-0" / TOPIC_ID_FILE) as f:
        assert f.read() == "new-id"


@pytest.mark.asyncio
async def test_a_directory_without_an_id_is_claimed_and_strays_are_removed(tmp_path):
    replicas = await opened(str(tmp_path), OLD)
    replica = replicas.get("t", 0)
    await replica.commit(replica.append(encode_values([b"kept"])))
    await replicas.close()
    os.unlink(tmp_path / "t-0" / TOPIC_ID_FILE)
    os.makedirs(tmp_path / "gone-3")
    os.makedirs(tmp_path / "gone-3.abc-delete")

    claimed = await opened(str(tmp_path), NEW)
    assert claimed.get("t", 0).log.log_end_offset == 1
    assert await claimed.remove_strays() == ["gone-3"]
    assert {"gone-3.abc-delete", "t-0"} <= set(os.listdir(tmp_path)) and not (tmp_path / "gone-3").exists()
    await claimed.close()
