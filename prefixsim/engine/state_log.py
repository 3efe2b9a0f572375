"""Each replica's observable state after each change: the raw material of timeseries.parquet.

A replica's queue lengths, cache occupancy and cumulative counters (query and hit tokens,
evicted pages, preemptions) change only at engine events: an arrival (routing, which may
also expire pages of TTL caches, docs/cache-semantics.md R11), the start of a step (admissions,
preemptions, reservations; the previous step's inserts and completions happen at the same
instant) and a replica going idle. Those points append one row here, so recording costs one
row per event, however long the simulated time; nothing wakes up to poll. Between rows the
state is constant, which is how metrics/timeseries.py derives the fixed-interval samples
after the run. Rows are kept as tuples and packed every `CHUNK_ROWS` into one array chunk
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

    __slots__ = ("_rows", "_columns")

    def __init__(self) -> None:
        self._rows: list[tuple] = []
        # per column, its packed chunks (time_s float64, the rest int64): a column is joined
        # into one array on its own, so `columns()` needs room for one column at a time
        self._columns: list[list[np.ndarray]] = [[] for _ in STATE_COLUMNS]

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
        """Move the pending rows into each column's chunks."""
        table = np.array(self._rows, dtype=np.float64)
        self._rows.clear()
        for i, chunks in enumerate(self._columns):
            chunks.append(table[:, i].copy() if i == 0 else table[:, i].astype(np.int64))

    def __len__(self) -> int:
        return sum(len(c) for c in self._columns[0]) + len(self._rows)

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as one array per column (time_s float64, the rest int64)."""
        if self._rows:
            self._pack()
        out = {}
        for name, chunks in zip(STATE_COLUMNS, self._columns, strict=True):
            if not chunks:
                chunks.append(np.empty(0, dtype=np.float64 if name == "time_s" else np.int64))
            elif len(chunks) > 1:
                chunks[:] = [np.concatenate(chunks)]  # its chunks are freed here
            out[name] = chunks[0]
        return out
