"""timeseries.parquet from the engines' recorded states (pure functions, after the run).

Timed mode:
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

Cache-only mode (rows recorded by engine/cache_samples.py at arrivals): time_s,
cache_usage (resident tokens / capacity; NaN when unbounded), cached_tokens,
rolling_hit_rate (NaN when no request arrived), evictions, expirations (cumulative pages).
No running/waiting/private/preemption columns: nothing queues or runs in cache-only mode.

A run that would give more than `max_rows` rows is sampled at the smallest whole multiple
of the requested interval that keeps it under; the returned `SamplingInfo` says so and
metrics/summary.py turns it into summary keys. See docs/results.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAX_ROWS = 100_000
TIMESERIES_COLUMNS = (
    "time_s", "replica", "running", "waiting", "cache_usage", "cached_tokens",
    "private_tokens", "rolling_hit_rate", "evictions", "preemptions",
)
CACHE_ONLY_COLUMNS = ("time_s", "cache_usage", "cached_tokens", "rolling_hit_rate",
                      "evictions", "expirations")


@dataclass(frozen=True)
class SamplingInfo:
    """How a timeseries was sampled: the interval asked for and the one used (coarser when
    the row cap forced it), the rows written and the cap."""

    requested_s: float
    used_s: float
    rows: int
    max_rows: int
    duration_s: float
    num_replicas: int | None = None  # timed runs: replicas sampled; None: cache-only

    @property
    def coarsened(self) -> bool:
        return self.used_s != self.requested_s


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
    # The ceiling is off by float rounding only, a step or two; the steps are bounded so that
    # a span where (factor - 1) * interval rounds to factor * interval cannot loop forever.
    for _ in range(16):
        if factor > 1 and _grid_points(duration_s, (factor - 1) * interval_s) <= per_replica:
            factor -= 1
        else:
            break
    steps = 0
    while _grid_points(duration_s, factor * interval_s) > per_replica:
        steps += 1
        factor += 1 if steps <= 16 else max(1, factor // 64)
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
        def taken(name: str, at: np.ndarray = at) -> np.ndarray:  # narrower in the log
            return states[name][at].astype(np.int64)

        cached, private = taken("cached_tokens"), taken("private_tokens")
        frames.append(pd.DataFrame({
            "time_s": times, "replica": np.full(len(times), replica, dtype=np.int64),
            "running": taken("running"), "waiting": taken("waiting"),
            "cache_usage": (cached + private) / capacity,
            "cached_tokens": cached, "private_tokens": private,
            "rolling_hit_rate": rate.astype(float),
            "evictions": taken("evictions"), "preemptions": taken("preemptions"),
        }))
    if not frames:
        return pd.DataFrame({name: [] for name in TIMESERIES_COLUMNS})
    frame = pd.concat(frames, ignore_index=True)
    order = np.lexsort((frame["replica"].to_numpy(), frame["time_s"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)[list(TIMESERIES_COLUMNS)]


def timeseries(result, interval_s: float | None, max_rows: int = MAX_ROWS
               ) -> tuple[pd.DataFrame, SamplingInfo | None]:
    """The timeseries frame of a TimedResult and how it was sampled (empty and None without
    states or without an interval)."""
    if interval_s is None or result.states is None:
        return pd.DataFrame(), None
    capacities = [figures.capacity_tokens for figures in result.replicas]
    used = effective_interval(result.duration_s, interval_s, len(capacities), max_rows)
    frame = sample_states(result.states, capacities, used, result.duration_s)
    return frame, SamplingInfo(interval_s, used, len(frame), max_rows, result.duration_s,
                               len(capacities))


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
                          max_rows: int = MAX_ROWS) -> tuple[pd.DataFrame, SamplingInfo | None]:
    """The timeseries frame of a cache-only replay and how it was sampled; empty and None
    without rows. `frame` is the requests frame (arrival_s, input_tokens, cached_tokens)."""
    if rows is None or used_s is None or requested_s is None:
        return pd.DataFrame(), None
    samples = sample_cache_states(rows, frame["arrival_s"].to_numpy(),
                                  frame["input_tokens"].to_numpy(),
                                  frame["cached_tokens"].to_numpy(), capacity_tokens, used_s,
                                  duration_s)
    return samples, SamplingInfo(requested_s, used_s, len(samples), max_rows, duration_s)
