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

Made with the sampling grid (`grid_s`: samples at whole multiples of a whole multiple of it),
the log keeps only the rows a sample can read: a replica's row is replaced by its next one
when no grid point falls between their times (within float rounding, so a grid coarsened
by a row cap, whose points are multiples of these, is served too), since the sample at a
point is the last row at or before it. Each replica's rows stay in time order; rows of
different replicas may not (only the per-replica order is read). Without a grid every row
is kept.
"""

from __future__ import annotations

from array import array
from math import ceil

import numpy as np

STATE_COLUMNS = (
    "time_s", "replica", "running", "waiting", "cached_tokens", "private_tokens",
    "query_tokens", "hit_tokens", "evictions", "preemptions",
)
CHUNK_ROWS = 1 << 16
WIDE = ("time_s", "query_tokens", "hit_tokens", "evictions")  # float64 / int64 columns
WIDTH = len(STATE_COLUMNS)
FIRST_ROWS = 64  # the pending buffer's first room, in rows (it doubles up to a chunk)


def _dtype(name: str) -> type:
    if name == "time_s":
        return np.float64
    return np.int64 if name in WIDE else np.int32


def grid_point_from_s(since_s: float, grid_s: float) -> float:
    """The time from which a later time lies past a grid point (k x `grid_s`) at or after
    `since_s`: that point less float rounding, so a point within rounding of either time
    counts (a grid coarsened by a row cap has points k x (m x grid_s), not (k m) x grid_s)."""
    slack = 1e-9 * (1.0 + abs(since_s))
    return ceil((since_s - slack) / grid_s) * grid_s - 2 * slack


class StateLog:
    """Rows of `STATE_COLUMNS`, each replica's in simulated-time order (module docstring).

    Compiled (state_log.pxd), a row comes in as C numbers (`record_state`) and is written
    into the pending buffer through a typed view of it."""

    __slots__ = ("_flat", "_buffer", "_rows", "_columns", "_size", "_grid_s", "_last_row",
                 "_until_s")

    def __init__(self, grid_s: float | None = None) -> None:
        # rows not packed yet, one after another: the first `_rows` rows of `_flat` (grown
        # by doubling up to a chunk); `_buffer` is the same buffer (compiled: a typed view)
        self._flat = array("d", bytes(8 * WIDTH * FIRST_ROWS))
        self._buffer = self._flat
        self._rows = 0
        # one array per column in its final dtype, grown by doubling: `columns()` hands out
        # views, so the rows are never copied whole again. (Joining chunks at the end would
        # double the log's memory: the freed chunks stay with the allocator, the joined
        # columns are new pages.)
        self._columns = [np.empty(0, dtype=_dtype(name)) for name in STATE_COLUMNS]
        self._size = 0
        self._grid_s = grid_s
        # per replica index: its last row's place among the pending rows (-1: packed or
        # none), and the time from which its next row must not replace it (a grid point
        # lies between)
        self._last_row: list[int] = []
        self._until_s: list[float] = []

    def record(self, row: tuple) -> None:
        """Append `row`, a replica's state now: one value per column of `STATE_COLUMNS`, its
        time and replica index first (engine/replica.py's `Replica.state_row`)."""
        if len(row) != WIDTH:
            raise ValueError(f"a state row has {WIDTH} values, got {len(row)}")
        self.record_state(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                          row[8], row[9])

    def record_state(self, time_s: float, replica: int, running: int, waiting: int,
                     cached_tokens: int, private_tokens: int, query_tokens: int,
                     hit_tokens: int, evictions: int, preemptions: int) -> None:
        """`record` of the row of these values (the columns of `STATE_COLUMNS`, in order)."""
        at = self._rows
        if self._grid_s is not None:
            last_row = self._last_row
            if replica >= len(last_row):
                grow = replica + 1 - len(last_row)
                last_row.extend([-1] * grow)
                self._until_s.extend([0.0] * grow)
            last = last_row[replica]
            if last >= 0 and time_s < self._until_s[replica]:
                at = last  # no sample can read the row it replaces
            else:
                last_row[replica] = at
                self._until_s[replica] = grid_point_from_s(time_s, self._grid_s)
        if at == self._rows and at * WIDTH == len(self._flat):
            self._grow()
        buffer = self._buffer
        base = at * WIDTH
        buffer[base] = time_s
        buffer[base + 1] = replica
        buffer[base + 2] = running
        buffer[base + 3] = waiting
        buffer[base + 4] = cached_tokens
        buffer[base + 5] = private_tokens
        buffer[base + 6] = query_tokens
        buffer[base + 7] = hit_tokens
        buffer[base + 8] = evictions
        buffer[base + 9] = preemptions
        if at == self._rows:
            self._rows = at + 1
            if at + 1 >= CHUNK_ROWS:
                self._pack()

    def _grow(self) -> None:
        """Twice the pending buffer's room (its rows copied)."""
        grown = array("d", bytes(16 * len(self._flat)))
        grown[:len(self._flat)] = self._flat
        self._buffer = self._flat = grown

    def _pack(self) -> None:
        """Move the pending rows into the column arrays."""
        table = np.frombuffer(self._flat, dtype=np.float64)[:self._rows * WIDTH].reshape(
            -1, WIDTH)
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
        self._rows = 0  # (the buffer keeps its room for the next chunk)
        self._last_row = [-1] * len(self._last_row)  # packed rows stay as they are

    def __len__(self) -> int:
        return self._size + self._rows

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as one array per column (time_s float64, counters int64, the rest
        int32): views of the log's arrays, valid as recorded (later rows do not change
        them)."""
        if self._rows:
            self._pack()
        size = self._size
        return {name: column[:size] for name, column in zip(STATE_COLUMNS, self._columns,
                                                               strict=True)}
