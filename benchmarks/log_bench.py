"""Log-only micro-benchmark: the partition log against the plain file loop it is built on.

Every comparison runs side by side in the same repetition (plain loop, then the log, same bytes,
same filesystem), because these machines are noisy: ratios are meaningful, absolute figures less.
Figures are medians of the repetitions with min and max beside them.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import shutil
import time
from collections.abc import Callable

from benchmarks import single_node
from benchmarks.single_node import Samples, gather, publish, summarize_all
from segments.batch import ProducerRecord, decode_records, encode_batch, encode_values
from segments.config import GIB, LogConfig
from segments.log import PartitionLog

MIB = 1 << 20
READ_CHUNK_BYTES = MIB
# Alternation step of the side-by-side comparison: one read call's worth, so each plain pread
# and each log read move the same whole batches.
RATIO_CHUNK_BYTES = READ_CHUNK_BYTES
SIZES = (100, 1024)
BATCH_RECORDS = (1, 100, 1000)
POLICIES = ("never", "interval", "always")
ENCODE_RECORDS = 1000


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    ratio_bytes: int
    append_seconds: float
    append_bytes_max: int
    encode_seconds: float


QUICK = Plan(reps=3, ratio_bytes=96 * MIB, append_seconds=0.2, append_bytes_max=48 * MIB, encode_seconds=0.3)
FULL = Plan(reps=5, ratio_bytes=512 * MIB, append_seconds=1.0, append_bytes_max=256 * MIB, encode_seconds=1.0)


def make_batch(size: int, records: int) -> bytes:
    return encode_batch([ProducerRecord(os.urandom(size)) for _ in range(records)])


def ratio_rep(work: str, batch: bytes, plan: Plan) -> dict[str, float]:
    """One side-by-side repetition over the same bytes: a plain ``os.write`` loop and the log's
    append, then a plain sequential ``pread`` loop and the log's read.

    The two sides alternate in chunks of ``RATIO_CHUNK_BYTES`` (which side goes first alternates
    too), so both meet the same page-cache and writeback pressure at the same moments; measured
    one after the other, writeback throttling made single runs swing by 5x. A chunk is whole
    batches, so a plain ``pread`` and a log read move exactly the same bytes per call."""
    per_chunk = max(1, RATIO_CHUNK_BYTES // len(batch))
    chunks = max(2, plan.ratio_bytes // (per_chunk * len(batch)))
    total = chunks * per_chunk * len(batch)
    plain_path = os.path.join(work, "plain.bin")
    log_dir = os.path.join(work, "ratio-0")
    fd = os.open(plain_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    log = PartitionLog.open(log_dir, LogConfig(flush="never", segment_bytes=GIB))
    t = {"write": 0.0, "append": 0.0, "read": 0.0, "log_read": 0.0}
    try:
        for chunk in range(chunks):
            for name in ("write", "append")[:: 1 if chunk % 2 == 0 else -1]:
                t[name] += _plain_write(fd, batch, per_chunk) if name == "write" else _log_append(log, batch, per_chunk)
        position, offset = 0, log.log_start_offset
        chunk_bytes = per_chunk * len(batch)
        for chunk in range(chunks):
            for name in ("read", "log_read")[:: 1 if chunk % 2 == 0 else -1]:
                if name == "read":
                    elapsed, position = _plain_read(fd, position, chunk_bytes)
                else:
                    elapsed, offset = _log_read(log, offset, chunk_bytes)
                t[name] += elapsed
        assert position == total and offset == log.log_end_offset, (position, offset)
    finally:
        os.close(fd)
        os.unlink(plain_path)
        log.close()
        shutil.rmtree(log_dir)
    return {
        "write_loop_mb_per_s": total / t["write"] / 1e6,
        "append_mb_per_s": total / t["append"] / 1e6,
        "append_ratio": t["write"] / t["append"],
        "read_loop_mb_per_s": total / t["read"] / 1e6,
        "read_mb_per_s": total / t["log_read"] / 1e6,
        "read_ratio": t["read"] / t["log_read"],
    }


def _plain_write(fd: int, data: bytes, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, data)
    return time.perf_counter() - start


def _log_append(log: PartitionLog, data: bytes, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        log.append(data, leader_epoch=0)
    return time.perf_counter() - start


def _plain_read(fd: int, position: int, size_bytes: int) -> tuple[float, int]:
    """Sequential 1 MiB ``pread``s of ``size_bytes`` from ``position``; returns (elapsed, end)."""
    end = position + size_bytes
    start = time.perf_counter()
    while position < end:
        position += len(os.pread(fd, min(READ_CHUNK_BYTES, end - position), position))
    return time.perf_counter() - start, position


def _log_read(log: PartitionLog, offset: int, size_bytes: int) -> tuple[float, int]:
    """Sequential 1 MiB log reads until ``size_bytes`` were read; returns (elapsed, next offset)."""
    done = 0
    start = time.perf_counter()
    while done < size_bytes:
        result = log.read(offset, min(READ_CHUNK_BYTES, size_bytes - done))
        done += len(result.data)
        offset = result.next_offset
    return time.perf_counter() - start, offset


def log_append_for(log: PartitionLog, data: bytes, count: int, seconds: float) -> tuple[float, int]:
    """Append ``data`` up to ``count`` times or until ``seconds`` pass; return (elapsed, appends)."""
    start = time.perf_counter()
    deadline = start + seconds
    done = 0
    while done < count:
        log.append(data, leader_epoch=0)
        done += 1
        if done % 8 == 0 and time.perf_counter() >= deadline:
            break
    return time.perf_counter() - start, done


def append_rep(work: str, size: int, records: int, policy: str, plan: Plan) -> tuple[float, float]:
    batch = make_batch(size, records)
    log_dir = os.path.join(work, f"append-{policy}-{size}-{records}")
    log = PartitionLog.open(log_dir, LogConfig(flush=policy, segment_bytes=GIB))  # type: ignore[arg-type]
    try:
        elapsed, appends = log_append_for(log, batch, plan.append_bytes_max // len(batch) + 1, plan.append_seconds)
    finally:
        log.close()
        shutil.rmtree(log_dir)
    return appends * records / elapsed, appends * len(batch) / elapsed / 1e6


def rate(fn: Callable[[], int], seconds: float) -> float:
    """Items per second of ``fn`` (which returns the items it handled), repeated for ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += fn()
    return done / (time.perf_counter() - start)


def codec_rep(plan: Plan) -> dict[str, float]:
    records = [ProducerRecord(os.urandom(100), key=b"key-%d" % i) for i in range(ENCODE_RECORDS)]
    values = [os.urandom(100) for _ in range(ENCODE_RECORDS)]
    batch = encode_batch(records)
    return {
        "encode_records_per_s": rate(lambda: len(encode_batch(records)) and ENCODE_RECORDS, plan.encode_seconds),
        "encode_values_records_per_s": rate(lambda: len(encode_values(values)) and ENCODE_RECORDS, plan.encode_seconds),
        "decode_records_per_s": rate(lambda: len(decode_records(batch)), plan.encode_seconds),
    }


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("logbench-", work_dir) as work:
        ratio_batch = make_batch(100, 1000)
        for rep in range(plan.reps):
            print(f"[log] side-by-side repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, ratio_rep(work, ratio_batch, plan))
            gather(samples, codec_rep(plan))
            for policy in POLICIES:
                for size in SIZES:
                    for records in BATCH_RECORDS:
                        rps, mbps = append_rep(work, size, records, policy, plan)
                        key = f"append_{policy}_{size}b_x{records}"
                        gather(samples, {f"{key}_records_per_s": rps, f"{key}_mb_per_s": mbps})
    figures, units = summarize_all(samples, lambda name: "ratio" if name.endswith("ratio") else
                                   "MB/s" if name.endswith("mb_per_s") else "records/s")
    params = {"quick": quick, **dataclasses.asdict(plan), "ratio_batch": "1000 records x 100 B",
              "read_chunk_bytes": READ_CHUNK_BYTES, "sizes_bytes": SIZES, "batch_records": BATCH_RECORDS}
    return publish("log", figures, units, out_dir=out_dir, started_at=started, params=params, version=_version())


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("logbroker")
    except Exception:
        return "unknown"
