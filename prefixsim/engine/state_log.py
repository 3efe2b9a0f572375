"""Each replica's observable state after each change: the raw material of timeseries.parquet.

A replica's queue lengths, cache occupancy and cumulative counters (query and hit tokens,
evicted pages, preemptions) change only at engine events: an arrival (routing, which may
also expire pages of TTL caches, docs/cache-semantics.md R11), the start of a step (admissions,
preemptions, reservations; the previous step's inserts and completions happen at the same
instant) and a replica going idle. Those points append one row here, so recording costs one
row per event, however long the simulated time; nothing wakes up to poll. Between rows the
state is constant, which is how metrics/timeseries.py derives the fixed-interval samples
after the run. Rows are appended to one flat float64 buffer (exact for counters below
2**53) and packed every `CHUNK_ROWS` into one growing array per column: float64 time,
int64 cumulative counters (query and hit tokens, evictions), int32 for the rest (a row's
queue lengths, tokens and preemptions stay below 2**31: the KV pool is counted in tokens),
60 bytes a row. Readers cast what they sample (metrics/timeseries.py).
"""

from __future__ import annotations

from array import array

import numpy as np

STATE_COLUMNS = (
    "time_s", "replica", "running", "waiting", "cached_tokens", "private_tokens",
    "query_tokens", "hit_tokens", "evictions", "preemptions",
)
CHUNK_ROWS = 1 << 16
WIDE = ("time_s", "query_tokens", "hit_tokens", "evictions")  # float64 / int64 columns
WIDTH = len(STATE_COLUMNS)


def _dtype(name: str) -> type:
    if name == "time_s":
        return np.float64
    return np.int64 if name in WIDE else np.int32


class StateLog:
    """Append-only rows of `STATE_COLUMNS`, in simulated-time order."""

    __slots__ = ("_flat", "_columns", "_size")

    def __init__(self) -> None:
        self._flat = array("d")  # rows not packed yet, one after another
        # one array per column in its final dtype, grown by doubling: `columns()` hands out
        # views, so the rows are never copied whole again. (Joining chunks at the end would
        # double the log's memory: the freed chunks stay with the allocator, the joined
        # columns are new pages.)
        self._columns = [np.empty(0, dtype=_dtype(name)) for name in STATE_COLUMNS]
        self._size = 0

    def record(self, replica) -> None:
        """A row for `replica` (engine/replica.py) as it stands now."""
        cache = replica.cache
        flat = self._flat
        flat.extend((replica.env.now, replica.index, len(replica.running),  # waiting: with
                     len(replica.waiting) + len(replica.loading),  # those loading (R15)
                     cache.resident_tokens, cache.reserved_tokens,
                     replica.query_tokens, replica.hit_tokens, cache.counters.evicted_pages,
                     replica.num_preemptions))
        if len(flat) >= CHUNK_ROWS * WIDTH:
            self._pack()

    def _pack(self) -> None:
        """Move the pending rows into the column arrays."""
        table = np.frombuffer(self._flat, dtype=np.float64).reshape(-1, WIDTH)
        size, added = self._size, len(table)
        columns = self._columns
        if size + added > len(columns[0]):
            capacity = max(2 * len(columns[0]), size + added)
            for i, column in enumerate(columns):
                grown = np.empty(capacity, dtype=column.dtype)
                grown[:size] = column[:size]
                columns[i] = grown
        for i, column in enumerate(columns):
            column[size:size + added] = table[:, i]  # (a cast: the values are whole numbers)
        self._size = size + added
        del table
        self._flat = array("d")

    def __len__(self) -> int:
        return self._size + len(self._flat) // WIDTH

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as one array per column (time_s float64, counters int64, the rest
        int32): views of the log's arrays, valid as recorded (later rows do not change
        them)."""
        if self._flat:
            self._pack()
        size = self._size
        return {name: column[:size] for name, column in zip(STATE_COLUMNS, self._columns,
                                                               strict=True)}
