"""Each replica's observable state after each change: the raw material of timeseries.parquet.

A replica's queue lengths, cache occupancy and cumulative counters (query and hit tokens,
evicted pages, preemptions) change only at engine events: an arrival (routing, which may
also expire pages of TTL caches, docs/cache-semantics.md R11), the start of a step (admissions,
preemptions, reservations; the previous step's inserts and completions happen at the same
instant) and a replica going idle. Those points append one row here, so recording costs one
row per event, however long the simulated time; nothing wakes up to poll. Between rows the
state is constant, which is how metrics/timeseries.py derives the fixed-interval samples
after the run. Rows are kept as tuples and packed every `CHUNK_ROWS` into one growing array
per column (80 bytes a row; counters stay exact below 2**53, as they pass through float64).
"""

from __future__ import annotations

import numpy as np

STATE_COLUMNS = (
    "time_s", "replica", "running", "waiting", "cached_tokens", "private_tokens",
    "query_tokens", "hit_tokens", "evictions", "preemptions",
)
CHUNK_ROWS = 1 << 16


class StateLog:
    """Append-only rows of `STATE_COLUMNS`, in simulated-time order."""

    __slots__ = ("_rows", "_columns", "_size")

    def __init__(self) -> None:
        self._rows: list[tuple] = []
        # one array per column in its final dtype (time_s float64, the rest int64), grown by
        # doubling: `columns()` hands out views, so the rows are never copied whole again.
        # (Joining chunks at the end would double the log's memory: the freed chunks stay
        # with the allocator, the joined columns are new pages.)
        self._columns = [np.empty(0, dtype=np.float64 if name == "time_s" else np.int64)
                         for name in STATE_COLUMNS]
        self._size = 0

    def record(self, replica) -> None:
        """A row for `replica` (engine/replica.py) as it stands now."""
        cache = replica.cache
        rows = self._rows
        rows.append((replica.env.now, replica.index, len(replica.running),
                     len(replica.waiting), cache.resident_tokens, cache.reserved_tokens,
                     replica.query_tokens, replica.hit_tokens, cache.counters.evicted_pages,
                     replica.num_preemptions))
        if len(rows) >= CHUNK_ROWS:
            self._pack()

    def _pack(self) -> None:
        """Move the pending rows into the column arrays."""
        table = np.array(self._rows, dtype=np.float64)
        self._rows.clear()
        size, added = self._size, len(table)
        columns = self._columns
        if size + added > len(columns[0]):
            capacity = max(2 * len(columns[0]), size + added)
            for i, column in enumerate(columns):
                grown = np.empty(capacity, dtype=column.dtype)
                grown[:size] = column[:size]
                columns[i] = grown
        for i, column in enumerate(columns):
            column[size:size + added] = table[:, i] if i == 0 else table[:, i].astype(np.int64)
        self._size = size + added

    def __len__(self) -> int:
        return self._size + len(self._rows)

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as one array per column (time_s float64, the rest int64): views of the
        log's arrays, valid as recorded (later rows do not change them)."""
        if self._rows:
            self._pack()
        size = self._size
        return {name: column[:size] for name, column in zip(STATE_COLUMNS, self._columns,
                                                               strict=True)}
