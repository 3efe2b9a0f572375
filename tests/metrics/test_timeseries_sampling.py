"""metrics/timeseries.py's sampling functions on small recorded states worked by hand: the
values and dtypes of every column (what timeseries.parquet stores), the edges of the
rolling hit rate (a window that queried one token, the first window), grid points before
the first recorded row, a cache of zero or unbounded capacity, no rows, no replicas, and
the row cap's interval where float rounding makes the first guess one step too coarse."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from prefixsim.metrics.timeseries import (
    CACHE_ONLY_COLUMNS,
    TIMESERIES_COLUMNS,
    cache_only_interval,
    cache_only_timeseries,
    effective_interval,
    sample_cache_states,
    sample_states,
    timeseries,
)

NAN = float("nan")


def same(values, expected) -> bool:
    """Equal element by element, NaN equal to NaN."""
    return np.array_equal(np.asarray(values, dtype=float), np.asarray(expected, dtype=float),
                          equal_nan=True)


# ------------------------------------------------------------------ the interval
def test_float_rounding_makes_the_first_guess_one_step_too_coarse():
    """7 s at 0.01 s, 5 rows: 701 grid points / 5 rounds up to 141 steps, yet 140 steps
    (1.4000000000000001 s) give floor(4.999...) + 1 = 5 rows: the smallest multiple wins;
    139 steps would give 6. The cache-only interval is the same rule on one replica, with
    the row cap handed on."""
    used = effective_interval(7.0, 0.01, 1, 5)
    assert used == 140 * 0.01
    assert math.floor(7.0 / used) + 1 == 5 and math.floor(7.0 / (139 * 0.01)) + 1 == 6
    assert cache_only_interval(7.0, 0.01, 5) == used
    assert cache_only_interval(7.0, 0.01) == 0.01  # 701 rows are under the default cap
    assert cache_only_interval(7.0, None, 5) is None


@pytest.mark.parametrize("interval", [0.0, -1.0, NAN])
def test_an_interval_must_be_positive(interval):
    with pytest.raises(ValueError, match=f"sample interval must be > 0, got {interval}"):
        effective_interval(10.0, interval, 1)


# ------------------------------------------------------------------ cache-only
ROWS = [(1.0, 100, 0, 0), (2.0, 300, 1, 2)]  # (grid time, resident, evicted, expired)
ARRIVALS = np.array([0.0, 1.5, 2.5])
QUERY = np.array([100, 1, 60])
HITS = np.array([50, 1, 30])


def test_cache_only_samples_by_hand():
    """Samples at 0, 1, 2, 3 s. At 0 no row is recorded yet: the zero state. Rows hold
    from their time on. Requests count in the window ending at the first sample at or after
    their arrival: the one at 0.0 in the first (100 queried, 50 hit: 0.5), none in (0, 1]
    (NaN), the 1-token one at 1.5 in (1, 2] (1.0), the one at 2.5 in (2, 3] (0.5)."""
    frame = sample_cache_states(ROWS, ARRIVALS, QUERY, HITS, 400, 1.0, 3.0)
    assert list(frame.columns) == list(CACHE_ONLY_COLUMNS)
    assert frame["time_s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert frame["cached_tokens"].tolist() == [0, 100, 300, 300]
    assert frame["cache_usage"].tolist() == [0.0, 0.25, 0.75, 0.75]
    assert same(frame["rolling_hit_rate"], [0.5, NAN, 1.0, 0.5])
    assert frame["evictions"].tolist() == [0, 0, 1, 1]
    assert frame["expirations"].tolist() == [0, 0, 2, 2]
    assert {name: str(frame[name].dtype) for name in CACHE_ONLY_COLUMNS} == {
        "time_s": "float64", "cache_usage": "float64", "cached_tokens": "int64",
        "rolling_hit_rate": "float64", "evictions": "int64", "expirations": "int64"}


def test_cache_usage_of_a_zero_and_of_an_unbounded_cache():
    """A cache of 0 tokens is never used (0.0); an unbounded one has no usage (NaN)."""
    zero = sample_cache_states(ROWS, ARRIVALS, QUERY, HITS, 0, 1.0, 3.0)
    assert zero["cache_usage"].tolist() == [0.0] * 4
    unbounded = sample_cache_states(ROWS, ARRIVALS, QUERY, HITS, None, 1.0, 3.0)
    assert same(unbounded["cache_usage"], [NAN] * 4)
    assert unbounded["cached_tokens"].tolist() == [0, 100, 300, 300]


def test_no_rows_sample_the_zero_state():
    frame = sample_cache_states([], np.array([]), np.array([]), np.array([]), 400, 0.5, 1.0)
    assert frame["time_s"].tolist() == [0.0, 0.5, 1.0]
    for name in ("cached_tokens", "evictions", "expirations"):
        assert frame[name].tolist() == [0, 0, 0] and frame[name].dtype == np.int64
    assert same(frame["rolling_hit_rate"], [NAN] * 3)


def test_cache_only_timeseries_needs_rows_and_both_intervals():
    """The frame and its SamplingInfo (no replica count: cache-only); nothing without rows,
    without the interval used or without the one asked for."""
    requests = pd.DataFrame({"arrival_s": ARRIVALS, "input_tokens": QUERY,
                             "cached_tokens": HITS})
    frame, info = cache_only_timeseries(ROWS, requests, 400, 0.5, 1.0, 3.0, max_rows=7)
    assert frame["rolling_hit_rate"].tolist()[2] == 1.0
    assert (info.requested_s, info.used_s, info.rows, info.max_rows, info.duration_s,
            info.num_replicas, info.coarsened) == (0.5, 1.0, 4, 7, 3.0, None, True)
    for rows, requested, used in ((None, 0.5, 1.0), (ROWS, None, 1.0), (ROWS, 0.5, None)):
        frame, info = cache_only_timeseries(rows, requests, 400, requested, used, 3.0)
        assert frame.empty and info is None


# ------------------------------------------------------------------ timed
def states_log(rows):
    """StateLog.columns() of hand-written rows (time, replica, running, waiting, cached,
    private, query, hit, evictions, preemptions): times float64, counters int64, the rest
    int32, as the log keeps them."""
    names = ("time_s", "replica", "running", "waiting", "cached_tokens", "private_tokens",
             "query_tokens", "hit_tokens", "evictions", "preemptions")
    kinds = (np.float64, np.int32, np.int32, np.int32, np.int32, np.int32, np.int64,
             np.int64, np.int64, np.int64)
    return {name: np.array([row[i] for row in rows], dtype=kind)
            for i, (name, kind) in enumerate(zip(names, kinds, strict=True))}


def test_timed_samples_by_hand():
    """Replica 0 (100 tokens) records at 0, 0.4 (a 1-token query, hit) and 1.2 (100 more
    queried, 50 hit, an eviction); replica 1 (200 tokens) records once, at 0, with a request
    already queried by then (10 tokens, 5 hit) and one preemption. Samples at 0, 1, 2 s,
    time-major, each the replica's last record at or before it."""
    log = states_log([
        (0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (0.0, 1, 1, 0, 20, 10, 10, 5, 0, 1),
        (0.4, 0, 1, 1, 16, 4, 1, 1, 0, 0),
        (1.2, 0, 2, 0, 40, 20, 101, 51, 1, 0),
    ])
    frame = sample_states(log, [100, 200], 1.0, 2.0)
    assert list(frame.columns) == list(TIMESERIES_COLUMNS)
    assert frame.index.tolist() == list(range(6))
    assert frame["time_s"].tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert frame["replica"].tolist() == [0, 1] * 3
    assert frame["running"].tolist() == [0, 1, 1, 1, 2, 1]
    assert frame["waiting"].tolist() == [0, 0, 1, 0, 0, 0]
    assert frame["cached_tokens"].tolist() == [0, 20, 16, 20, 40, 20]
    assert frame["private_tokens"].tolist() == [0, 10, 4, 10, 20, 10]
    assert frame["cache_usage"].tolist() == [0.0, 0.15, 0.2, 0.15, 0.6, 0.15]
    assert same(frame["rolling_hit_rate"], [NAN, 0.5, 1.0, NAN, 0.5, NAN])
    assert frame["evictions"].tolist() == [0, 0, 0, 0, 1, 0]
    assert frame["preemptions"].tolist() == [0, 1, 0, 1, 0, 1]
    assert {name: str(frame[name].dtype) for name in TIMESERIES_COLUMNS} == {
        "time_s": "float64", "replica": "int64", "running": "int64", "waiting": "int64",
        "cache_usage": "float64", "cached_tokens": "int64", "private_tokens": "int64",
        "rolling_hit_rate": "float64", "evictions": "int64", "preemptions": "int64"}


def test_a_replica_without_a_record_and_a_fleet_without_replicas():
    log = states_log([(0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0)])
    with pytest.raises(ValueError, match="no recorded state for replica 1"):
        sample_states(log, [100, 100], 1.0, 1.0)
    empty = sample_states(log, [], 1.0, 1.0)
    assert list(empty.columns) == list(TIMESERIES_COLUMNS) and empty.empty


def test_timeseries_says_how_it_sampled():
    """A timed result's frame and SamplingInfo: the interval asked for and used, the rows,
    the cap, the duration and the replicas sampled; nothing without states or interval."""
    log = states_log([(0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0), (0.0, 1, 0, 0, 0, 0, 0, 0, 0, 0)])
    result = SimpleNamespace(states=log, duration_s=9.0,
                             replicas=[SimpleNamespace(capacity_tokens=100)] * 2)
    frame, info = timeseries(result, 1.0, max_rows=8)  # 4 samples a replica: every 3 s
    assert frame["time_s"].tolist() == [0.0, 0.0, 3.0, 3.0, 6.0, 6.0, 9.0, 9.0]
    assert (info.requested_s, info.used_s, info.rows, info.max_rows, info.duration_s,
            info.num_replicas) == (1.0, 3.0, 8, 8, 9.0, 2)
    for interval, states in ((None, log), (1.0, None)):
        frame, info = timeseries(SimpleNamespace(states=states, duration_s=9.0,
                                                 replicas=result.replicas), interval)
        assert frame.empty and info is None
