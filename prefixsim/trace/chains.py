"""The chained-id check of fields.py's ChainCheck, for whole chunks of pages at once.

Ids must be chained: an id always follows the same parent id (or always starts a prompt).
`ChunkChains` checks a chunk of pages (ids in file order, with where each prompt starts)
against itself and against every earlier chunk, with numpy: the chunk's pages sorted by id
(stable, so an id's first occurrence leads its run), every occurrence's parent compared
with the first's, the chunk's ids looked up in the known ones (one sorted array of ids and
one of their parents: 16 bytes per distinct id, where ChainCheck's dict takes ~100), and the
new ones merged in. It only says whether the chunks so far are consistent; the reader that
uses it re-reads a trace that is not with the exact per-line checks, to name the line.
`check_async` runs the work in a thread (numpy's sorts release the GIL), so a reader's
parsing and the checking of its previous chunk overlap on two cores. `requests_chained`
checks a whole trace held in memory at once (the timed engine's caches then keep no
resident-id set: cache/segment_tree.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import chain

import numpy as np

from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.record import Request

NO_PARENT = np.iinfo(np.int64).min  # parent of a prompt's first page (ids are checked < 2^63)


TABLE_UNSET = -1  # a table slot of an id not seen yet
TABLE_NO_PARENT = -2  # NO_PARENT in the table (whose ids and parents are >= 0)
TABLE_IDS = 1 << 28  # ids below this (and >= 0) go in a direct int32 table: 1 GiB at most


class ChunkChains:
    """Known ids and parents; `check(ids, starts)` adds a chunk or finds it inconsistent.

    Small non-negative ids (traces number their pages densely: generated ones from 0, the
    Mooncake release up to ~10^6) are kept in a direct table, parent_of[id] (int32: 4 bytes
    an id value), checked with no sort at all; the first id past TABLE_IDS (or below 0) moves
    them to the sorted arrays."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.parents = np.zeros(0, dtype=np.int64)
        self.table: np.ndarray | None = np.zeros(0, dtype=np.int32)
        self.ok = True
        self._thread: threading.Thread | None = None

    def expect(self, low: int, high: int) -> None:
        """Size the direct table for ids in [low, high] at once, when they fit it (a
        reader that knows its ids' range, from Parquet statistics): growing it by half as
        ids rise allocates, fills and copies about three times its final size."""
        if self.table is not None and 0 <= low and high < TABLE_IDS:
            self._grow_table(high + 1)

    def _grow_table(self, size: int) -> np.ndarray:
        """The direct table, first grown to `size` slots (new ones unset) if smaller."""
        table = self.table
        if size > len(table):
            grown = np.full(size, TABLE_UNSET, dtype=np.int32)
            grown[:len(table)] = table
            table = self.table = grown
        return table

    def _check_table(self, ids: np.ndarray, parents: np.ndarray, high: int) -> bool:
        table = self.table
        if high + 1 > len(table):  # grown by half (not doubled): the table is most of the memory
            table = self._grow_table(max(high + 1, len(table) + len(table) // 2))
        parents = np.where(parents == NO_PARENT, TABLE_NO_PARENT, parents).astype(np.int32)
        known = table[ids]
        seen = known != TABLE_UNSET
        if np.any(known[seen] != parents[seen]):
            return False
        table[ids] = parents  # new ids: whichever occurrence writes last...
        return bool(np.all(table[ids] == parents))  # ...must agree with every other one

    def _to_sorted(self) -> None:
        table = self.table
        ids = np.flatnonzero(table != TABLE_UNSET)
        parents = table[ids].astype(np.int64)
        parents[parents == TABLE_NO_PARENT] = NO_PARENT
        self.ids, self.parents, self.table = ids.astype(np.int64), parents, None

    def check(self, ids: np.ndarray, starts: np.ndarray) -> bool:
        """Check a chunk: `ids` of its pages in file order, `starts` the index of each
        prompt's first page (prompts with no page have none). False: ids not chained."""
        if not self.ok or len(ids) == 0:
            return self.ok
        low, high = int(ids.min()), int(ids.max())
        if low == NO_PARENT:
            self.ok = False  # an id equal to the marker: let the exact check decide
            return False
        parents = np.empty_like(ids)
        parents[1:] = ids[:-1]
        parents[starts] = NO_PARENT
        if self.table is not None:
            if low >= 0 and high < TABLE_IDS:
                self.ok = self._check_table(ids, parents, high)
                return self.ok
            self._to_sorted()
        order = np.argsort(ids, kind="stable")
        sid, spar = ids[order], parents[order]
        head = np.ones(len(sid), dtype=bool)
        head[1:] = sid[1:] != sid[:-1]
        group = np.cumsum(head) - 1
        canonical = spar[head]
        if np.any(spar != canonical[group]):
            self.ok = False
            return False
        unique = sid[head]
        if len(self.ids):
            at = np.searchsorted(self.ids, unique)
            at_clipped = np.minimum(at, len(self.ids) - 1)
            known = self.ids[at_clipped] == unique
            if np.any(self.parents[at_clipped[known]] != canonical[known]):
                self.ok = False
                return False
            unique, canonical = unique[~known], canonical[~known]
        merged = np.concatenate([self.ids, unique])
        order = np.argsort(merged, kind="stable")  # two sorted runs
        self.ids = merged[order]
        self.parents = np.concatenate([self.parents, canonical])[order]
        return True

    def check_async(self, ids: np.ndarray, starts: np.ndarray) -> None:
        """`check` in a thread, after the previous chunk's (call `wait` for the verdict)."""
        previous = self._thread

        def run() -> None:
            if previous is not None:
                previous.join()
            self.check(ids, starts)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait(self) -> bool:
        """Whether every chunk so far is chained (joins the pending check)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.ok


CHECK_BLOCK = 1 << 16  # requests per check of a trace in memory (bounded temporaries)


def requests_chained(requests: Sequence[Request]) -> bool:
    """Whether the page ids of `requests` are chained, as ChunkChains checks a stream's
    chunks, a block of requests at a time (its temporaries stay a block's: 1M chat requests
    checked whole held 470 MB more). An id that cannot be an int64, or equals the
    no-parent marker, says no. True for none."""
    chains = ChunkChains()
    columns = requests if isinstance(requests, RequestColumns) else None
    for first in range(0, len(requests), CHECK_BLOCK):
        last = min(first + CHECK_BLOCK, len(requests))
        if columns is not None:
            bounds = columns.page_start[first:last + 1]
            ids = columns.page_ids[bounds[0]:bounds[-1]]
            bounds = bounds - bounds[0]
        else:
            block = requests[first:last]
            counts = np.fromiter((len(r.page_ids) for r in block), dtype=np.int64,
                                 count=len(block))
            bounds = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=bounds[1:])
            try:
                ids = np.fromiter(chain.from_iterable(r.page_ids for r in block),
                                  dtype=np.int64, count=int(bounds[-1]))
            except (OverflowError, TypeError, ValueError):
                return False
        if not chains.check(ids, bounds[:-1][np.diff(bounds) > 0]):
            return False
    return True
