"""What checking a prebuilt batch at produce costs (decision 0220): ``check_batch`` per batch and
per record, for small and large batches, uncompressed and compressed, beside a reader's decode of
the same batch (``decode_columns``) for scale.

Run ``python -m benchmarks.batch_check_bench [--quick]``; run it with ``PYTHONPATH`` pointing at
another checkout to measure that checkout's ``check_batch`` on the same batches (before and
after). Each figure is the median of ``reps`` timings of a loop of at least ``loop_s`` seconds, in
one process, single-threaded (the node runs the check in its decode pool for batches over 64 KiB
or compressed, and on the event loop below that).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from logbroker.batch_limits import check_batch
from segments.batch import ProducerRecord, decode_columns, encode_batch
from segments.compression import Codec

# (name, records per batch, value bytes, codec, headers per record)
CASES = (
    ("1 x 100 B", 1, 100, Codec.NONE, 0),
    ("10 x 100 B", 10, 100, Codec.NONE, 0),
    ("100 x 100 B", 100, 100, Codec.NONE, 0),
    ("1000 x 100 B", 1000, 100, Codec.NONE, 0),
    ("1000 x 100 B, 2 headers", 1000, 100, Codec.NONE, 2),
    ("1000 x 1 KiB", 1000, 1024, Codec.NONE, 0),
    ("10000 x 100 B", 10_000, 100, Codec.NONE, 0),
    ("1000 x 100 B zstd", 1000, 100, Codec.ZSTD, 0),
    ("1000 x 100 B lz4", 1000, 100, Codec.LZ4, 0),
    ("10000 x 100 B zstd", 10_000, 100, Codec.ZSTD, 0),
    ("100000 x 100 B zstd", 100_000, 100, Codec.ZSTD, 0),
)


def make(records: int, size: int, codec: Codec, headers: int) -> bytes:
    pairs = [(f"h{i}", b"v" * 8) for i in range(headers)]
    # Half random, half repeated bytes: compressible as real payloads often are.
    return encode_batch([ProducerRecord(os.urandom(size // 2) + b"x" * (size - size // 2), None, pairs)
                         for _ in range(records)], codec=codec)


def timed(fn: Callable[[], object], loop_s: float, reps: int) -> float:
    """Median seconds per call over ``reps`` loops of at least ``loop_s`` each."""
    fn()
    samples = []
    for _ in range(reps):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < loop_s:
            fn()
            calls += 1
        samples.append(elapsed / calls)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_check_bench")
    parser.add_argument("--quick", action="store_true", help="shorter loops, fewer repetitions")
    args = parser.parse_args(argv)
    loop_s, reps = (0.2, 3) if args.quick else (1.0, 5)
    print(f"{'batch':<26}{'bytes':>10}{'check us/batch':>16}{'check us/rec':>14}{'decode us/batch':>17}")
    for name, records, size, codec, headers in CASES:
        batch = make(records, size, codec, headers)
        check = timed(lambda b=batch: check_batch(b), loop_s, reps)  # type: ignore[misc]
        decode = timed(lambda b=batch: decode_columns(b), loop_s, reps)  # type: ignore[misc]
        print(f"{name:<26}{len(batch):>10}{check * 1e6:>16.1f}{check * 1e6 / records:>14.3f}{decode * 1e6:>17.1f}")


if __name__ == "__main__":
    main()
