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
import tempfile
import time
from collections.abc import Callable

from benchmarks.results import DEFAULT_OUT_DIR, summarize, write_result
from segments.batch import ProducerRecord, decode_records, encode_batch, encode_values
from segments.config import GIB, LogConfig
from segments.log import PartitionLog

MIB = 1 << 20
READ_CHUNK_BYTES = MIB
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


def plain_write(path: str, data: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def plain_read(path: str) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        size, position = os.fstat(fd).st_size, 0
        start = time.perf_counter()
        while position < size:
            position += len(os.pread(fd, READ_CHUNK_BYTES, position))
        return time.perf_counter() - start
    finally:
        os.close(fd)


def log_append(log: PartitionLog, data: bytes, count: int, seconds: float | None = None) -> tuple[float, int]:
    """Append ``data`` up to ``count`` times (or until ``seconds`` pass); return (elapsed, appends)."""
    start = time.perf_counter()
    deadline = start + seconds if seconds is not None else None
    done = 0
    while done < count:
        log.append(data, leader_epoch=0)
        done += 1
        if deadline is not None and done % 8 == 0 and time.perf_counter() >= deadline:
            break
    return time.perf_counter() - start, done


def log_read(log: PartitionLog) -> tuple[float, int]:
    offset, end, total = log.log_start_offset, log.log_end_offset, 0
    start = time.perf_counter()
    while offset < end:
        result = log.read(offset, READ_CHUNK_BYTES)
        total += len(result.data)
        offset = result.next_offset
    return time.perf_counter() - start, total


def ratio_rep(work: str, batch: bytes, plan: Plan, log_first: bool) -> dict[str, float]:
    """One side-by-side repetition: plain write/read loop and the log on the same bytes; the
    order alternates between repetitions so neither side always meets a warmer page cache."""
    count = max(1, plan.ratio_bytes // len(batch))
    total = count * len(batch)
    timings: dict[str, float] = {}

    def plain() -> None:
        plain_path = os.path.join(work, "plain.bin")
        timings["write"] = plain_write(plain_path, batch, count)
        timings["read"] = plain_read(plain_path)
        os.unlink(plain_path)

    def logged() -> None:
        log_dir = os.path.join(work, "ratio-0")
        log = PartitionLog.open(log_dir, LogConfig(flush="never", segment_bytes=GIB))
        try:
            timings["append"], _ = log_append(log, batch, count)
            timings["log_read"], read_total = log_read(log)
            assert read_total == total, (read_total, total)
        finally:
            log.close()
            shutil.rmtree(log_dir)

    for step in ((logged, plain) if log_first else (plain, logged)):
        step()
    return {
        "write_loop_mb_per_s": total / timings["write"] / 1e6,
        "append_mb_per_s": total / timings["append"] / 1e6,
        "append_ratio": timings["write"] / timings["append"],
        "read_loop_mb_per_s": total / timings["read"] / 1e6,
        "read_mb_per_s": total / timings["log_read"] / 1e6,
        "read_ratio": timings["read"] / timings["log_read"],
    }


def append_rep(work: str, size: int, records: int, policy: str, plan: Plan) -> tuple[float, float]:
    batch = make_batch(size, records)
    log_dir = os.path.join(work, f"append-{policy}-{size}-{records}")
    log = PartitionLog.open(log_dir, LogConfig(flush=policy, segment_bytes=GIB))  # type: ignore[arg-type]
    try:
        elapsed, appends = log_append(log, batch, plan.append_bytes_max // len(batch) + 1, plan.append_seconds)
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
    values = [r.value for r in records]
    batch = encode_batch(records)
    return {
        "encode_records_per_s": rate(lambda: len(encode_batch(records)) and ENCODE_RECORDS, plan.encode_seconds),
        "encode_values_records_per_s": rate(lambda: len(encode_values(values)) and ENCODE_RECORDS, plan.encode_seconds),
        "decode_records_per_s": rate(lambda: len(decode_records(batch)), plan.encode_seconds),
    }


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    work = tempfile.mkdtemp(prefix="logbench-", dir=work_dir or os.getcwd())
    samples: dict[str, list[float]] = {}
    try:
        ratio_batch = make_batch(100, 1000)
        for rep in range(plan.reps):
            print(f"[log] side-by-side repetition {rep + 1}/{plan.reps}", flush=True)
            for name, value in ratio_rep(work, ratio_batch, plan, log_first=rep % 2 == 1).items():
                samples.setdefault(name, []).append(value)
            for name, value in codec_rep(plan).items():
                samples.setdefault(name, []).append(value)
            for policy in POLICIES:
                for size in SIZES:
                    for records in BATCH_RECORDS:
                        rps, mbps = append_rep(work, size, records, policy, plan)
                        key = f"append_{policy}_{size}b_x{records}"
                        samples.setdefault(f"{key}_records_per_s", []).append(rps)
                        samples.setdefault(f"{key}_mb_per_s", []).append(mbps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    for name, values in samples.items():
        unit = "ratio" if name.endswith("ratio") else "MB/s" if name.endswith("mb_per_s") else "records/s"
        summarize(name, values, unit, figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "ratio_batch": "1000 records x 100 B",
              "read_chunk_bytes": READ_CHUNK_BYTES, "sizes_bytes": SIZES, "batch_records": BATCH_RECORDS}
    path = write_result(out_dir or DEFAULT_OUT_DIR, "log", system="logbroker", version=_version(),
                        started_at=started, params=params, figures=figures, units=units)
    print_table(figures, units)
    print(f"[log] wrote {path}")
    return figures


def print_table(figures: dict[str, float], units: dict[str, str]) -> None:
    names = [n for n in figures if not n.endswith(("_min", "_max"))]
    width = max(len(n) for n in names)
    print(f"{'figure':<{width}}  {'median':>14}  {'min':>14}  {'max':>14}  unit")
    for name in names:
        print(f"{name:<{width}}  {figures[name]:>14,.2f}  {figures[name + '_min']:>14,.2f}  "
              f"{figures[name + '_max']:>14,.2f}  {units[name]}")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("logbroker")
    except Exception:
        return "unknown"
