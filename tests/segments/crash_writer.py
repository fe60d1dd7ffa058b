"""A writer process for the crash tests: appends batches forever and reports each acked append.

Usage: python -m tests.segments.crash_writer <partition_dir> <flush_policy>
Prints ``<base_offset> <last_offset>`` after every append returns, flushing stdout each time.
"""

from __future__ import annotations

import sys

from segments.batch import ProducerRecord, encode_batch
from segments.config import LogConfig
from segments.log import PartitionLog

APPENDS_MAX = 10_000_000


def main() -> None:
    directory, policy = sys.argv[1], sys.argv[2]
    log = PartitionLog.open(directory, LogConfig(segment_bytes=64 * 1024, flush=policy))  # type: ignore[arg-type]
    for n in range(APPENDS_MAX):
        size = 1 + (n * 7919) % 40
        records = [ProducerRecord(f"{n}:{i}".encode() * 3, timestamp=1_000 + n) for i in range(size)]
        info = log.append(encode_batch(records), leader_epoch=n // 1000)
        sys.stdout.write(f"{info.base_offset} {info.last_offset}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
