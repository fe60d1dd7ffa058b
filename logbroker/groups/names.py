"""Group names in sorted order, so that a page of ``GET /v1/groups`` (the names after a cursor)
costs O(log groups + page), not a sort of every group per call.

A list of sorted chunks of at most ``2 * CHUNK`` names, and each chunk's largest name: adding or
removing a name is a bisection over the chunks' maxima and an insert into one chunk (O(log n +
CHUNK), plus a move of the chunk list when a chunk splits or empties). Every name of chunk ``i``
is smaller than every name of chunk ``i + 1``; no chunk is empty.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Final

CHUNK: Final = 512


class SortedNames:
    def __init__(self) -> None:
        self._chunks: list[list[str]] = []
        self._maxes: list[str] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        i = bisect_left(self._maxes, name)
        if i == len(self._maxes):
            return False
        chunk = self._chunks[i]
        j = bisect_left(chunk, name)
        return j < len(chunk) and chunk[j] == name

    def add(self, name: str) -> None:
        if not self._chunks:
            self._chunks.append([name])
            self._maxes.append(name)
            self._count = 1
            return
        i = min(bisect_left(self._maxes, name), len(self._maxes) - 1)
        chunk = self._chunks[i]
        j = bisect_left(chunk, name)
        if j < len(chunk) and chunk[j] == name:
            return
        chunk.insert(j, name)
        self._count += 1
        if len(chunk) > 2 * CHUNK:
            upper = chunk[CHUNK:]
            del chunk[CHUNK:]
            self._chunks.insert(i + 1, upper)
            self._maxes.insert(i + 1, upper[-1])
        self._maxes[i] = chunk[-1]

    def discard(self, name: str) -> None:
        i = bisect_left(self._maxes, name)
        if i == len(self._maxes):
            return
        chunk = self._chunks[i]
        j = bisect_left(chunk, name)
        if j == len(chunk) or chunk[j] != name:
            return
        del chunk[j]
        self._count -= 1
        if chunk:
            self._maxes[i] = chunk[-1]
        else:
            del self._chunks[i]
            del self._maxes[i]

    def after(self, cursor: str | None, count: int) -> tuple[list[str], bool]:
        """Up to ``count`` names greater than ``cursor`` (None: from the first), in order, and
        whether more follow them."""
        i = 0 if cursor is None else bisect_right(self._maxes, cursor)
        j = 0 if cursor is None or i == len(self._chunks) else bisect_right(self._chunks[i], cursor)
        out: list[str] = []
        while i < len(self._chunks) and len(out) < count:
            chunk = self._chunks[i]
            take = chunk[j:j + count - len(out)]
            out += take
            j += len(take)
            if j == len(chunk):
                i, j = i + 1, 0
        return out, i < len(self._chunks)

    def verify(self) -> None:
        """Assert the invariants (tests)."""
        assert all(self._chunks) and len(self._chunks) == len(self._maxes)
        assert [c[-1] for c in self._chunks] == self._maxes
        flat = [n for c in self._chunks for n in c]
        assert flat == sorted(set(flat)) and len(flat) == self._count
