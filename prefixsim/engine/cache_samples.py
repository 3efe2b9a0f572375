"""The cache-only replay's timeseries: the cache's state at t = 0, dt, 2 dt, ... of trace time.

A cache-only replay changes the cache only at request arrivals, so the sample at t is the
state after every request that arrived at or before t (as serving_timeseries.py samples the
timed engine). The replay loop keeps `upcoming`, the first grid point not yet sampled; before
a request that arrives after it, it appends one row for the state left by the earlier requests
(which holds from `upcoming` up to that arrival), and the next grid point at or after the
arrival becomes `upcoming`. That is one float comparison per request and at most one row per
request, however small dt: no per-page work and nothing that polls. The last row is taken
after the loop. Rows are (grid time, resident tokens, evicted pages, expired pages), the same
on RadixCache and SegmentCache. Rolling hit rates come after the run from the per-request
records (hit / query tokens of the requests that arrived since the previous sample).

Columns: time_s, cache_usage (resident tokens / capacity; NaN when unbounded), cached_tokens,
rolling_hit_rate (NaN when no request arrived), evictions, expirations (cumulative pages).
No running/waiting/private/preemption columns: nothing queues or runs in cache-only mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from prefixsim.serving_timeseries import MAX_ROWS, _grid_points, effective_interval

CACHE_ONLY_COLUMNS = ("time_s", "cache_usage", "cached_tokens", "rolling_hit_rate",
                      "evictions", "expirations")


def next_sample(now: float, interval_s: float) -> float:
    """The first grid point k * interval_s (k >= 0) at or after `now`, computed as the
    sampler computes its grid (float k times the interval)."""
    k = max(math.ceil(now / interval_s), 0)
    while k * interval_s < now:
        k += 1
    return k * interval_s


def state_row(upcoming: float, cache) -> tuple:
    """The row a replay appends at a crossing (RadixCache and SegmentCache alike)."""
    counters = cache.counters
    return (upcoming, cache.resident_tokens, counters.evicted_pages, counters.expired_pages)


def sample_cache_states(rows: Sequence[tuple], arrivals: np.ndarray, query: np.ndarray,
                        hits: np.ndarray, capacity_tokens: int | None, interval_s: float,
                        duration_s: float) -> pd.DataFrame:
    """One row every `interval_s` up to `duration_s` from the replay's rows and the requests'
    arrival times, input tokens and hit tokens (module docstring)."""
    times = np.arange(_grid_points(duration_s, interval_s)) * interval_s
    times = times[times <= max(duration_s, 0.0)]
    table = (np.array(rows, dtype=np.float64) if len(rows)
             else np.empty((0, 4), dtype=np.float64))
    # a zero row before everything: grid points before the first recorded one (none arrive
    # before t = 0 in a trace read from disk, but a hand-built one may)
    table = np.vstack([np.array([[-np.inf, 0, 0, 0]]), table])
    at = np.searchsorted(table[:, 0], times, side="right") - 1
    cached = table[at, 1].astype(np.int64)
    upto = np.searchsorted(np.asarray(arrivals, dtype=np.float64), times, side="right")
    cum_query = np.concatenate([[0], np.cumsum(np.asarray(query, dtype=np.int64))])[upto]
    cum_hits = np.concatenate([[0], np.cumsum(np.asarray(hits, dtype=np.int64))])[upto]
    queried = np.diff(cum_query, prepend=0)
    hit = np.diff(cum_hits, prepend=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(queried > 0, hit / np.maximum(queried, 1), np.nan)
    usage = (cached / capacity_tokens if capacity_tokens
             else np.full(len(times), np.nan if capacity_tokens is None else 0.0))
    return pd.DataFrame({
        "time_s": times,
        "cache_usage": np.asarray(usage, dtype=float),
        "cached_tokens": cached,
        "rolling_hit_rate": rate.astype(float),
        "evictions": table[at, 2].astype(np.int64),
        "expirations": table[at, 3].astype(np.int64),
    }, columns=list(CACHE_ONLY_COLUMNS))


def cache_only_interval(duration_s: float, interval_s: float | None,
                        max_rows: int = MAX_ROWS) -> float | None:
    """The interval a replay samples at: `interval_s` or its smallest whole multiple that
    keeps the timeseries within `max_rows` (None: no timeseries)."""
    if interval_s is None:
        return None
    return effective_interval(duration_s, interval_s, 1, max_rows)


def cache_only_timeseries(rows: Sequence[tuple] | None, frame: pd.DataFrame,
                          capacity_tokens: int | None, requested_s: float | None,
                          used_s: float | None, duration_s: float,
                          max_rows: int = MAX_ROWS) -> tuple[pd.DataFrame, dict[str, object]]:
    """The timeseries frame of a cache-only replay and its summary keys (the timed run's:
    timeseries_interval_s, timeseries_rows, timeseries_warning when the cap coarsened it);
    empty without rows. `frame` is the requests frame (arrival_s, input_tokens,
    cached_tokens)."""
    if rows is None or used_s is None or requested_s is None:
        return pd.DataFrame(), {}
    samples = sample_cache_states(rows, frame["arrival_s"].to_numpy(),
                                  frame["input_tokens"].to_numpy(),
                                  frame["cached_tokens"].to_numpy(), capacity_tokens, used_s,
                                  duration_s)
    summary: dict[str, object] = {"timeseries_interval_s": used_s,
                                  "timeseries_rows": len(samples)}
    if used_s != requested_s:
        summary["timeseries_warning"] = (
            f"timeseries sampled every {used_s:g} s instead of {requested_s:g} s to stay under "
            f"{max_rows:,} rows ({duration_s:,.0f} simulated s)")
    return samples, summary
