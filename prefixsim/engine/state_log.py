"""Each replica's observable state after each change: the raw material of timeseries.parquet.

A replica's queue lengths, cache occupancy and cumulative counters (query and hit tokens,
evicted pages, preemptions) change only at engine events: an arrival (routing, which may
also expire pages of TTL caches, docs/cache-semantics.md R11), the start of a step (admissions,
preemptions, reservations; the previous step's inserts and completions happen at the same
instant) and a replica going idle. Those points append one row here, so recording costs one
row per event, however long the simulated time; nothing wakes up to poll. Between rows the
state is constant, which is how metrics/timeseries.py derives the fixed-interval samples
after the run. Rows are kept as tuples and packed into a float64 block every `CHUNK_ROWS`
(80 bytes a row; counters stay exact below 2**53).
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

    __slots__ = ("_rows", "_chunks")

    def __init__(self) -> None:
        self._rows: list[tuple] = []
        self._chunks: list[np.ndarray] = []

    def record(self, replica) -> None:
        """A row for `replica` (engine/replica.py) as it stands now."""
        cache = replica.cache
        rows = self._rows
        rows.append((replica.env.now, replica.index, len(replica.running),
                     len(replica.waiting), cache.resident_tokens, cache.reserved_tokens,
                     replica.query_tokens, replica.hit_tokens, cache.counters.evicted_pages,
                     replica.num_preemptions))
        if len(rows) >= CHUNK_ROWS:
            self._chunks.append(np.array(rows, dtype=np.float64))
            rows.clear()

    def __len__(self) -> int:
        return sum(len(c) for c in self._chunks) + len(self._rows)

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as one array per column (time_s float64, the rest int64)."""
        blocks = [*self._chunks]
        if self._rows:
            blocks.append(np.array(self._rows, dtype=np.float64))
        table = (np.concatenate(blocks) if blocks
                 else np.empty((0, len(STATE_COLUMNS)), dtype=np.float64))
        out = {name: table[:, i].astype(np.int64) for i, name in enumerate(STATE_COLUMNS)}
        out["time_s"] = table[:, 0].copy()
        return out
