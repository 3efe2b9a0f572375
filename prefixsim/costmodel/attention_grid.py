"""Attention times read from a profile's measured grids (docs/cost-models.md "Reading the
tables"), for the per-GPU heads of a run.

- Prefill (one chunk of n new tokens after c cached): the grid over chunk sizes (rows) and
  cached tokens (columns). A row's tail beyond its largest cached count rises at its own
  measured slope, or, for the short rows of large chunks, at the slope of the largest row
  that measured one, scaled by the chunk size (work per cached token grows with the chunk).
  A chunk larger than the largest row is split in halves, n/2 after c and n/2 after
  c + n/2, which is the same attention work; the halves' floors are counted once.
  Chunks below the smallest row read it (a tile is filled anyway).
- Decode (a batch of contexts): the grid over batch sizes (rows) and context tokens, read
  at the batch's mean context; a batch larger than the largest row scales that row's time
  above the floor by the batch size.
- Other heads than the grid's: the time above the grid's floor scales with query heads x
  head dim for prefill (compute) and KV heads x head dim for decode (KV reads).

Leaves out: the split of attention between prefill and decode kernels in one call (a step
runs one prefill call for all its chunks and one decode call, as Vidur measured them).
"""

from __future__ import annotations

import numpy as np

from prefixsim.costmodel.profile_parts import AttentionGrid
from prefixsim.costmodel.tables import RowGrid, Table1D

MIN_SLOPE_POINTS = 4
MIN_SLOPE_RANGE = 256  # cached tokens a row must span to define its own tail slope


class PrefillTimes:
    """Seconds of prefill attention per chunk, from `grid`, for `num_heads` x `head_dim`."""

    def __init__(self, grid: AttentionGrid, num_heads: int, head_dim: int) -> None:
        self.floor_s = grid.floor_s
        self.scale = num_heads * head_dim / (grid.num_heads * grid.head_dim)
        measured = {row.key: Table1D(row.x, row.time_s) for row in grid.rows
                    if len(row.x) >= MIN_SLOPE_POINTS and row.x[-1] >= MIN_SLOPE_RANGE}
        ref = max(measured) if measured else None
        rows = {}
        for row in grid.rows:
            if row.key in measured:
                rows[row.key] = measured[row.key]
                continue
            slope = 0.0 if ref is None else measured[ref].tail_slope * row.key / ref
            rows[row.key] = Table1D(row.x, row.time_s, tail_slope=slope)
        self.grid = RowGrid(rows)

    def _raw_s(self, new_tokens: int, cached_tokens: int) -> float:
        if new_tokens > self.grid.max_key:
            half = new_tokens // 2
            return (self._raw_s(half, cached_tokens)
                    + self._raw_s(new_tokens - half, cached_tokens + half) - self.floor_s)
        return self.grid.time_s(new_tokens, cached_tokens)

    def above_floor_s(self, new_tokens: int, cached_tokens: int) -> float:
        """The chunk's time less the kernel floor (a step pays one floor for all chunks)."""
        return max(0.0, self._raw_s(new_tokens, cached_tokens) - self.floor_s) * self.scale

    def chunk_s(self, new_tokens: int, cached_tokens: int) -> float:
        return self.floor_s + self.above_floor_s(new_tokens, cached_tokens)


class DecodeTimes:
    """Seconds of one decode attention call, from `grid`, for `num_kv_heads` x `head_dim`."""

    def __init__(self, grid: AttentionGrid, num_kv_heads: int, head_dim: int) -> None:
        self.floor_s = grid.floor_s
        self.scale = num_kv_heads * head_dim / (grid.num_kv_heads * grid.head_dim)
        self.grid = RowGrid({row.key: Table1D(row.x, row.time_s) for row in grid.rows})

    def _scaled(self, raw: np.ndarray | float, batch: int) -> np.ndarray | float:
        above = np.maximum(0.0, raw - self.floor_s)
        if batch > self.grid.max_key:
            above = above * (batch / self.grid.max_key)
        return self.floor_s + above * self.scale

    def batch_s(self, batch: int, mean_context: float) -> float:
        raw = self.grid.time_s(min(batch, self.grid.max_key), mean_context)
        return float(self._scaled(raw, batch))

    def run_s(self, batch: int, mean_context: float, num_steps: int) -> float:
        """Sum over steps k < num_steps of `batch_s(batch, mean_context + k)`."""
        columns = mean_context + np.arange(num_steps, dtype=float)
        raw = self.grid.times_s_at(min(batch, self.grid.max_key), columns)
        return float(np.sum(self._scaled(raw, batch)))
