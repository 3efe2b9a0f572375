"""Measured-time tables and how the fitted model reads between their points
(docs/cost-models.md "Reading the tables").

- `Table1D`: times over one axis (tokens, bytes, batch size): piecewise linear between
  points; below the first point its time (or, with `extend_low`, the first segment's line,
  never below zero); beyond the last point that point's time plus a tail slope, by default
  the slope measured from about half the last point's x (the bandwidth- or compute-bound
  rate), or one given.
- `RowGrid`: times over two axes as rows (one `Table1D` per row key, e.g. per chunk size
  over cached tokens): each bracketing row read at the column, then linear between the rows;
  keys below the first row read the first row. Keys beyond the last row are the caller's
  rule (attention.py). Both take numpy arrays for the column so a decode run is summed in one
  vectorised call.

Leaves out: smoothing (a table holds measured medians, noise included) and any fitting.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


class Table1D:
    """Measured `(x, time)` points and the reading rules of the module docstring."""

    def __init__(self, xs: Sequence[float], times_s: Sequence[float], *,
                 tail_slope: float | None = None, extend_low: bool = False) -> None:
        pairs = sorted(zip(xs, times_s, strict=True))
        if not pairs:
            raise ValueError("a table needs at least one point")
        self._x = [float(x) for x, _ in pairs]
        self._y = [float(t) for _, t in pairs]
        self.xs = np.array(self._x)
        self.times_s = np.array(self._y)
        self.tail_slope = self.measured_tail_slope() if tail_slope is None else tail_slope
        self.low_slope = 0.0
        if extend_low and len(self.xs) > 1:
            self.low_slope = float((self.times_s[1] - self.times_s[0])
                                   / (self.xs[1] - self.xs[0]))

    def measured_tail_slope(self) -> float:
        """Rise per unit of x from the largest point at or below half the last x to the
        last point (0 with one point or a falling tail)."""
        xs, ys = self.xs, self.times_s
        top = len(xs) - 1
        j = int(np.searchsorted(xs, xs[top] / 2, side="right")) - 1
        j = max(j, 0)
        if j >= top:
            return 0.0
        return max(0.0, float((ys[top] - ys[j]) / (xs[top] - xs[j])))

    def time_s(self, x: float) -> float:
        xs, ys = self._x, self._y
        if x >= xs[-1]:
            return ys[-1] + (x - xs[-1]) * self.tail_slope
        if x <= xs[0]:
            return max(0.0, ys[0] + (x - xs[0]) * self.low_slope)
        i = bisect.bisect_right(xs, x)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)

    def times_s_at(self, x: np.ndarray) -> np.ndarray:
        """`time_s` of every element of `x`."""
        x = np.asarray(x, dtype=float)
        out = np.interp(x, self.xs, self.times_s)
        high = x > self.xs[-1]
        out[high] = self.times_s[-1] + (x[high] - self.xs[-1]) * self.tail_slope
        low = x < self.xs[0]
        out[low] = np.maximum(0.0, self.times_s[0] + (x[low] - self.xs[0]) * self.low_slope)
        return out


class RowGrid:
    """Rows of measured times: `rows[key]` is a Table1D over the column axis."""

    def __init__(self, rows: dict[int, Table1D]) -> None:
        if not rows:
            raise ValueError("a grid needs at least one row")
        self.keys = sorted(rows)
        self.rows = rows

    @property
    def max_key(self) -> int:
        return self.keys[-1]

    def _bracket(self, key: float) -> tuple[int, int, float]:
        keys = self.keys
        if key <= keys[0]:
            return keys[0], keys[0], 0.0
        if key >= keys[-1]:
            return keys[-1], keys[-1], 0.0
        i = bisect.bisect_left(keys, key)
        if keys[i] == key:
            return keys[i], keys[i], 0.0
        k0, k1 = keys[i - 1], keys[i]
        return k0, k1, (key - k0) / (k1 - k0)

    def time_s(self, key: float, column: float) -> float:
        k0, k1, w = self._bracket(key)
        low = self.rows[k0].time_s(column)
        return low if w == 0.0 else low + w * (self.rows[k1].time_s(column) - low)

    def times_s_at(self, key: float, columns: np.ndarray) -> np.ndarray:
        k0, k1, w = self._bracket(key)
        low = self.rows[k0].times_s_at(columns)
        return low if w == 0.0 else low + w * (self.rows[k1].times_s_at(columns) - low)
