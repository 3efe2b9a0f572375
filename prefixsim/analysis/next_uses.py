"""Next uses of a streamed trace, on disk: for every page a request names (in replay order),
the replay position of the next request that names the same page id, or -1 when none does.

The offline Belady policy needs the future. A run that reads its trace whole keeps every use
in memory (cache/belady.py: 16 bytes a use). A streamed run (pipeline/streamed.py) instead
makes two passes before its replay: the first writes the trace's page ids to a file (4 bytes
a use); the second walks that file backwards a block of whole requests at a time, keeping
the next position of every page id in a table indexed by the id (4 bytes per id value:
traces number their pages densely), and writes each use's next position to a second file
(4 bytes a use), which the replay then reads forward a chunk at a time. Memory: the table,
the request offsets (8 bytes a request) and one block; disk: 8 bytes a use while building,
4 after. Page ids outside the table (negative, or 2^28 and up) make the run read its trace
whole (`NotStreamable`), as does anything else the stream gives up on.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.stream import NotStreamable

TABLE_IDS = 1 << 28  # page ids the next-position table takes (1 GiB of int32 at most)
BLOCK_USES = 1 << 22  # page uses walked at a time (about 4M: ~100 MB of temporaries)


class NextUses:
    """The next-use positions of a trace, a file of int32 per page use in replay order."""

    def __init__(self, path: Path, starts: np.ndarray) -> None:
        self.path = path
        self.starts = starts  # request i's uses are [starts[i], starts[i + 1])
        total = int(starts[-1]) if len(starts) else 0
        self._uses = (np.memmap(path, dtype=np.int32, mode="r", shape=(total,)) if total
                      else np.zeros(0, dtype=np.int32))

    def __len__(self) -> int:
        """Requests covered."""
        return len(self.starts) - 1

    @classmethod
    def build(cls, chunks: Iterable[RequestColumns], folder: Path) -> NextUses:
        """Pass over `chunks` (the whole trace, in replay order) and write its next uses
        under `folder` (module docstring)."""
        ids_path, next_path = folder / "page-ids.bin", folder / "next-uses.bin"
        counts: list[np.ndarray] = []
        top = -1
        with ids_path.open("wb") as out:
            for chunk in chunks:
                ids = np.asarray(chunk.page_ids)
                if len(ids):
                    low, high = int(ids.min()), int(ids.max())
                    if low < 0 or high >= TABLE_IDS:
                        raise NotStreamable("page ids too large for the next-use table")
                    top = max(top, high)
                out.write(ids.astype(np.int32).tobytes())
                counts.append(np.diff(np.asarray(chunk.page_start)))
        count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
        starts = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=starts[1:])
        total = int(starts[-1])
        next_path.touch()
        if total:
            _walk_backwards(ids_path, next_path, starts, count, top)
        ids_path.unlink()
        return cls(next_path, starts)

    def chunk(self, first: int, size: int) -> tuple[np.ndarray, list[int]]:
        """Requests [first, first + size): their next uses as one array (read from the
        file now) and each request's offsets into it (request i's are
        uses[offsets[i]:offsets[i + 1]])."""
        offsets = self.starts[first:first + size + 1]
        base = int(offsets[0])
        return np.array(self._uses[base:int(offsets[-1])]), (offsets - base).tolist()


def _walk_backwards(ids_path: Path, next_path: Path, starts: np.ndarray, count: np.ndarray,
                    top: int) -> None:
    """Fill `next_path` from the last block of requests to the first. Within a block the
    uses sorted by (id, position) find their next use in the same block as the following
    entry of the same id; the last of each id takes the table's, then the first of each id
    becomes the table's."""
    total = int(starts[-1])
    ids = np.memmap(ids_path, dtype=np.int32, mode="r", shape=(total,))
    uses = np.memmap(next_path, dtype=np.int32, mode="w+", shape=(total,))
    following = np.full(top + 1, -1, dtype=np.int32)
    cuts = np.unique(np.append(np.searchsorted(starts, np.arange(0, total, BLOCK_USES)),
                               len(count)))
    for lo, hi in zip(cuts[-2::-1], cuts[:0:-1], strict=True):
        begin, end = int(starts[lo]), int(starts[hi])
        if begin == end:
            continue
        block_ids = np.asarray(ids[begin:end])
        positions = np.repeat(np.arange(lo, hi, dtype=np.int32), count[lo:hi])
        order = np.lexsort((positions, block_ids))
        sorted_ids, sorted_positions = block_ids[order], positions[order]
        same = sorted_ids[1:] == sorted_ids[:-1]
        later = np.empty_like(sorted_positions)
        later[:-1] = np.where(same, sorted_positions[1:], following[sorted_ids[:-1]])
        later[-1] = following[sorted_ids[-1]]
        block = np.empty_like(later)
        block[order] = later
        uses[begin:end] = block
        firsts = np.ones(len(sorted_ids), dtype=bool)
        firsts[1:] = ~same
        following[sorted_ids[firsts]] = sorted_positions[firsts]
    uses.flush()
    del uses, ids
