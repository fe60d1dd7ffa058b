"""Poison batches for tests: a header and checksum that are right around record rows that are not
(an integer key where bytes belong), as a producer could send them before produce checked rows,
and a real node process that stores them as such a node did.

``RowUncheckedNode`` runs the node's own entry point in a process whose produce check is cut back
to the header and checksum (what produce checked before decision 0220), so the tests can store a
poison batch through the front door and then watch every reader meet it.
"""

from __future__ import annotations

import struct
import sys

import msgpack
import xxhash

from segments.batch import HEADER_SIZE, LENGTH_PREFIX_SIZE, now_ms
from segments.compression import Codec, compress
from tests.support.nodes import NodeProcess

_packer = msgpack.Packer(use_bin_type=True)


def batch_of_rows(rows: list[object], *, codec: Codec = Codec.NONE, base_offset: int = 0,
                  timestamp_ms: int | None = None) -> bytes:
    """A checksummed batch around ``rows`` (any msgpack values), as many records as rows."""
    stamp = now_ms() if timestamp_ms is None else timestamp_ms
    section = compress(codec, _packer.pack(rows))
    count = len(rows)
    body = struct.pack("<HIqqqhiI", int(codec), count - 1, stamp, stamp, -1, -1, -1, count)
    checksum = xxhash.xxh3_64_intdigest(body + section)
    prefix = struct.pack("<QII", base_offset, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(section), 0)
    return prefix + b"\x01" + struct.pack("<Q", checksum) + body + section


def poison_batch(values: list[bytes], bad_at: int, *, codec: Codec = Codec.NONE, base_offset: int = 0) -> bytes:
    """A batch of ``values`` whose record ``bad_at`` has an integer key (every reader used to fail
    on it); the records before it are well formed."""
    rows: list[object] = [[i, 0, None, v, []] for i, v in enumerate(values)]
    rows[bad_at] = [bad_at, 0, 42, values[bad_at], []]
    return batch_of_rows(rows, codec=codec, base_offset=base_offset)


_ENTRY = ("import runpy, sys\n"
          "import http_api.records, segments.batch\n"
          "def header_only(batch):\n"
          "    header = segments.batch.validate_batch(batch)\n"
          "    class Checked:\n"
          "        pass\n"
          "    checked = Checked()\n"
          "    checked.header, checked.timestamp_min, checked.timestamp_max = header, header.first_timestamp, "
          "header.max_timestamp\n"
          "    return checked\n"
          "http_api.records.check_batch = header_only\n"
          "http_api.records.is_costly = lambda batch: False\n"
          "sys.argv = ['logbroker', *sys.argv[1:]]\n"
          "runpy.run_module('logbroker', run_name='__main__')\n")


class RowUncheckedNode(NodeProcess):
    """A real node whose produce checks a prebuilt batch's header and checksum only."""

    def __init__(self, data_dir: str, *extra: str) -> None:
        super().__init__(data_dir, *extra)
        assert self.args[1:3] == ["-m", "logbroker"]
        self.args = [sys.executable, "-c", _ENTRY, *self.args[3:]]
