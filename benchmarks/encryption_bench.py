"""The cost of encryption at rest: the same produce and consume against three nodes started side by
side, the order rotated in each repetition (decision 0319):

- ``off``: no key ring (the zero-copy ``sendfile`` fetch, no extra pass anywhere);
- ``on``: a key ring, topics sealed (the default then): AES-256-GCM on append, and every fetch read,
  opened and written instead of sent from the file;
- ``keyed_plain``: a key ring, the topic's ``encryption`` off: batches stored plain, but fetches
  take the read-and-open path (it cannot know without reading that no batch is sealed), which
  shows what replacing ``sendfile`` costs apart from the cipher.

Measured per mode: produce of 100-byte records in batches of 1000 and of 10; consume of the whole
topic as raw batches (checksums verified, records counted from headers) and decoded into records.
Figures are records/s per mode, ``*_ratio`` = on / off and keyed_plain / off, and the cipher's own
throughput in-process (``seal_mib_per_s``, ``open_mib_per_s`` on a 100 KiB batch).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final

import uvloop

from benchmarks import single_node
from benchmarks.auth_bench import produce
from benchmarks.node_bench import PARTITIONS, RECORD_BYTES, consume
from benchmarks.plan import BATCH_FULL, BATCH_QUICK
from benchmarks.plan import BatchPlan as Plan
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from logbroker.client import Client
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, encode_batch
from segments.encryption import open_batch, seal_batch
from segments.key_ring import KeyRing, new_key, write_ring

MODES: Final = ("off", "on", "keyed_plain")
CIPHER_BATCH_RECORDS: Final = 1000
CIPHER_ROUNDS: Final = 2000
MIB: Final = 1024 * 1024


QUICK, FULL = BATCH_QUICK, BATCH_FULL


async def one_rep(client: Client, rep: int, plan: Plan, topic_config: dict[str, Any]) -> dict[str, float]:
    topic = f"crypt-bench-{rep}"
    await client.create_topic(topic, partitions=PARTITIONS, config={"flush": "interval", **topic_config})
    big_s = await produce(client, topic, plan.big_batch_records, 1000)
    small_s = await produce(client, topic, plan.small_batch_records, 10)
    raw_s, consumed = await consume(client, topic, decode=False)
    decoded_s, decoded = await consume(client, topic, decode=True)
    assert consumed == decoded == plan.big_batch_records + plan.small_batch_records, (consumed, decoded)
    await client.delete_topic(topic)
    return {"produce_batch1000_records_per_s": plan.big_batch_records / big_s,
            "produce_batch10_records_per_s": plan.small_batch_records / small_s,
            "consume_raw_records_per_s": consumed / raw_s,
            "consume_decoded_records_per_s": decoded / decoded_s}


def cipher_mib_per_s(rounds: int) -> dict[str, float]:
    """The cipher alone, in-process: seal and open of one batch of 1000 records of 100 bytes."""
    ring = KeyRing({1: new_key()}, 1)
    batch = encode_batch([ProducerRecord(os.urandom(RECORD_BYTES)) for _ in range(CIPHER_BATCH_RECORDS)])
    nonce = os.urandom(12)
    started = time.perf_counter()
    for _ in range(rounds):
        sealed = seal_batch(batch, ring, nonce)
    seal_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(rounds):
        open_batch(sealed, ring)
    open_s = time.perf_counter() - started
    size_mib = len(batch) * rounds / MIB
    return {"seal_mib_per_s": size_mib / seal_s, "open_mib_per_s": size_mib / open_s}


def _measure(url: str, topic_config: dict[str, Any]) -> Callable[[int, Plan], Coroutine[Any, Any, dict[str, float]]]:
    async def run(rep: int, plan: Plan) -> dict[str, float]:
        async with Client(url) as client:
            return await one_rep(client, rep, plan, topic_config)

    return run


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("cryptbench-", work_dir) as work:
        keys = os.path.join(work, "keys")
        write_ring(keys, KeyRing({1: new_key()}, 1))
        quiet = ("--log-level", "warning")
        with NodeProcess(os.path.join(work, "off"), *quiet) as off, \
                NodeProcess(os.path.join(work, "on"), *quiet, "--encryption-keys-file", keys) as on:
            modes = {"off": _measure(off.url, {}), "on": _measure(on.url, {}),
                     "keyed_plain": _measure(on.url, {"encryption": "off"})}
            for rep in range(plan.reps):
                order = MODES[rep % 3:] + MODES[:rep % 3]
                print(f"[encryption] repetition {rep + 1}/{plan.reps} ({' then '.join(order)})", flush=True)
                for mode in order:
                    gather(samples, {f"encryption_{mode}_{name}": value
                                     for name, value in uvloop.run(modes[mode](rep, plan)).items()})
                gather(samples, cipher_mib_per_s(CIPHER_ROUNDS // (4 if quick else 1)))
    figures, units = summarize_all(samples, lambda name: "MiB/s" if name.endswith("_mib_per_s") else "records/s")
    for name in list(samples):
        for mode in ("on", "keyed_plain"):
            if name.startswith(f"encryption_{mode}_"):
                base = name.removeprefix(f"encryption_{mode}_")
                ratios = [a / b for a, b in zip(samples[name], samples[f"encryption_off_{base}"], strict=True)]
                summarize(f"{mode}_{base}_ratio", ratios, f"{mode}/off", figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "partitions": PARTITIONS, "record_bytes": RECORD_BYTES,
              "acks": "1", "flush": "interval", "cipher": "AES-256-GCM", "modes": list(MODES)}
    return publish("encryption", figures, units, out_dir=out_dir, started_at=started, params=params)
