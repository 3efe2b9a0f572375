"""timeseries.parquet from the replicas' recorded states (pure functions, after the run).

The engine records each replica's state at every change (engine/state_log.py); between two
records nothing changes, so the sample of a replica at time t is its last record at or
before t (ties at t: the state after everything that happened at t). Samples fall at
t = 0, dt, 2 dt, ... <= duration for every replica, time-major. Columns:

  time_s, replica, running, waiting  requests in the batch and in the queue
  cache_usage                        (cached + private tokens) / KV pool
  cached_tokens, private_tokens      tokens held by cache pages / reserved by requests
  rolling_hit_rate                   hit / query tokens of the requests admitted since the
                                     previous sample (NaN when none was admitted)
  evictions, preemptions             cumulative counts up to t

A run that would give more than `max_rows` rows is sampled at the smallest whole multiple
of the requested interval that keeps it under; `timeseries_summary` says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

MAX_ROWS = 100_000
TIMESERIES_COLUMNS = (
    "time_s", "replica", "running", "waiting", "cache_usage", "cached_tokens",
    "private_tokens", "rolling_hit_rate", "evictions", "preemptions",
)


def _grid_points(duration_s: float, interval_s: float) -> int:
    return math.floor(max(duration_s, 0.0) / interval_s) + 1


def effective_interval(duration_s: float, interval_s: float, num_replicas: int,
                       max_rows: int = MAX_ROWS) -> float:
    """`interval_s`, or its smallest whole multiple giving at most `max_rows` rows (at
    least one sample per replica)."""
    if not interval_s > 0:
        raise ValueError(f"sample interval must be > 0, got {interval_s}")
    per_replica = max(1, max_rows // max(num_replicas, 1))
    factor = max(1, math.ceil(_grid_points(duration_s, interval_s) / per_replica))
    while factor > 1 and _grid_points(duration_s, (factor - 1) * interval_s) <= per_replica:
        factor -= 1
    while _grid_points(duration_s, factor * interval_s) > per_replica:
        factor += 1
    return factor * interval_s


def sample_states(states: Mapping[str, np.ndarray], capacities: Sequence[int],
                  interval_s: float, duration_s: float) -> pd.DataFrame:
    """One row per replica every `interval_s` from its recorded states (module docstring).

    `states` is StateLog.columns() (time-ordered, a row for every replica at t = 0);
    `capacities` the replicas' KV pools in tokens.
    """
    times = np.arange(_grid_points(duration_s, interval_s)) * interval_s
    times = times[times <= max(duration_s, 0.0)]
    frames = []
    for replica, capacity in enumerate(capacities):
        mine = np.flatnonzero(states["replica"] == replica)
        if len(mine) == 0:
            raise ValueError(f"no recorded state for replica {replica}")
        at = mine[np.maximum(np.searchsorted(states["time_s"][mine], times, side="right") - 1,
                             0)]
        query = states["query_tokens"][at]
        hits = states["hit_tokens"][at]
        queried = np.diff(query, prepend=0)
        hit = np.diff(hits, prepend=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(queried > 0, hit / np.maximum(queried, 1), np.nan)
        cached, private = states["cached_tokens"][at], states["private_tokens"][at]
        frames.append(pd.DataFrame({
            "time_s": times, "replica": np.full(len(times), replica, dtype=np.int64),
            "running": states["running"][at], "waiting": states["waiting"][at],
            "cache_usage": (cached + private) / capacity,
            "cached_tokens": cached, "private_tokens": private,
            "rolling_hit_rate": rate.astype(float),
            "evictions": states["evictions"][at], "preemptions": states["preemptions"][at],
        }))
    if not frames:
        return pd.DataFrame({name: [] for name in TIMESERIES_COLUMNS})
    frame = pd.concat(frames, ignore_index=True)
    order = np.lexsort((frame["replica"].to_numpy(), frame["time_s"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)[list(TIMESERIES_COLUMNS)]


def timeseries(result, interval_s: float | None, max_rows: int = MAX_ROWS
               ) -> tuple[pd.DataFrame, dict[str, object]]:
    """The timeseries frame of a TimedResult and its summary keys (empty without states or
    without an interval)."""
    if interval_s is None or result.states is None:
        return pd.DataFrame(), {}
    capacities = [figures.capacity_tokens for figures in result.replicas]
    used = effective_interval(result.duration_s, interval_s, len(capacities), max_rows)
    frame = sample_states(result.states, capacities, used, result.duration_s)
    summary: dict[str, object] = {"timeseries_interval_s": used, "timeseries_rows": len(frame)}
    if used != interval_s:
        summary["timeseries_warning"] = (
            f"timeseries sampled every {used:g} s instead of {interval_s:g} s to stay under "
            f"{max_rows:,} rows ({result.duration_s:,.0f} simulated s x {len(capacities)} "
            "replicas)")
    return frame, summary
