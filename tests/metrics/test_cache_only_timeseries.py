"""Cache-only replays record a timeseries over trace time (engine/cache_samples.py).

Known answers worked by hand on tiny traces, on both cache classes (RadixCache and the
compressed SegmentCache, which tests/cache/test_segment_tree.py also compares on generated traces);
the row cap coarsens the interval as in timed mode; `prefixsim run --cache-only` writes
timeseries.parquet.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from click.testing import CliRunner
from fakes import without_segment_cache
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, TTLRule
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cli import app
from prefixsim.config import RunConfig
from prefixsim.engine import replay_cache_only
from prefixsim.engine.cache_samples import next_sample
from prefixsim.metrics.timeseries import CACHE_ONLY_COLUMNS
from prefixsim.pipeline import simulate
from prefixsim.trace import Request

NAN = float("nan")


def as_rows(frame: pd.DataFrame) -> list[tuple]:
    """Rows with NaN as None, so they compare with ==."""
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row)
            for row in frame[list(CACHE_ONLY_COLUMNS)].itertuples(index=False)]


@pytest.fixture(params=[RadixCache, SegmentCache])
def cache_class(request, monkeypatch):
    """Run simulate() on the given cache class (SegmentCache is picked where it applies)."""
    if request.param is RadixCache:
        without_segment_cache(monkeypatch)
    return request.param


def test_capacity_known_answer(cache_class):
    """P=4, capacity 12 tokens, LRU, samples every 1 s.
    r0 t=0.5 [1,2] (8 tokens): no hit, 8 resident.  r1 t=0.5 [1,2,3] (10 tokens): hits 8,
    inserts page 3 (2 tokens): 10 resident.  r2 t=2 [4,5] (8): no hit; 2 free, evicts leaf 3
    then leaf 2 (2 evictions), inserts: 12 resident.  r3 t=3.7 [1,6]: hits 4, evicts 5.
    Samples at 0, 1, 2, 3 (the last arrival is 3.7): t=0 nothing arrived (rate NaN);
    t=1 10/12 resident, rate 8/18; t=2 (r2 arrives at 2.0, included) 12/12, rate 0/8,
    2 evictions; t=3 nothing arrived since t=2 (rate NaN), r3's eviction not yet."""
    requests = [Request(0, 0.5, 8, 1, (1, 2), 4), Request(1, 0.5, 10, 1, (1, 2, 3), 4),
                Request(2, 2.0, 8, 1, (4, 5), 4), Request(3, 3.7, 8, 1, (1, 6), 4)]
    config = RunConfig.model_validate({"cache_only": True,
                                       "cache": {"capacity_tokens": 12, "policy": "lru"}})
    result = simulate(config, requests)
    assert result.requests["cached_tokens"].tolist() == [0, 8, 0, 4]
    assert result.summary["cache_evictions"] == 3
    assert list(result.timeseries.columns) == list(CACHE_ONLY_COLUMNS)
    assert as_rows(result.timeseries) == [
        (0.0, 0.0, 0, None, 0, 0),
        (1.0, 10 / 12, 10, 8 / 18, 0, 0),
        (2.0, 1.0, 12, 0.0, 2, 0),
        (3.0, 1.0, 12, None, 2, 0),
    ]
    assert result.summary["timeseries_interval_s"] == 1.0
    assert result.summary["timeseries_rows"] == 4
    assert "timeseries_warning" not in result.summary


def test_ttl_known_answer(cache_class):
    """Unbounded, sliding TTL 1 s, P=4, samples every 1 s. r0 t=0 [1,2] (8 tokens) inserts 8;
    its pages are alive through their deadline 1.0 and gone after it (R12): the sampler frees
    them by the grid point t=2, before the next arrival (r1 t=2.5 [3], 4 tokens, inserts 3;
    r2 t=3 [3] hits 3, L - 1). t=0: 8 resident, rate 0/8; t=1: still 8 (nothing arrived,
    rate NaN, usage NaN: no capacity); t=2: none, 2 expirations; t=3: 4 resident, rate 3/8.
    A run that samples nothing counts the same 2 expirations, at r1."""
    requests = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 2.5, 4, 1, (3,), 4),
                Request(2, 3.0, 4, 1, (3,), 4)]
    config = RunConfig.model_validate({"cache_only": True,
                                       "cache": {"capacity_tokens": None, "ttl_s": 1.0}})
    result = simulate(config, requests)
    assert result.summary["cache_expirations"] == 2
    assert as_rows(result.timeseries) == [
        (0.0, None, 8, 0.0, 0, 0),
        (1.0, None, 8, None, 0, 0),
        (2.0, None, 0, None, 0, 2),
        (3.0, None, 4, 3 / 8, 0, 2),
    ]
    unsampled = simulate(config.model_copy(update={"engine": config.engine.model_copy(
        update={"sample_interval_s": None})}), requests)
    assert unsampled.summary["cache_expirations"] == 2
    assert unsampled.requests.equals(result.requests)


def test_sample_interval_and_no_timeseries(cache_class):
    """engine.sample_interval_s sets the period; null records none (no summary keys)."""
    requests = [Request(i, 0.25 * i, 8, 1, (1 + i, 100 + i), 4) for i in range(9)]  # 0..2 s
    half = simulate(RunConfig.model_validate(
        {"cache_only": True, "engine": {"sample_interval_s": 0.5}}), requests)
    assert half.timeseries["time_s"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert half.timeseries["cached_tokens"].tolist() == [8, 24, 40, 56, 72]
    off = simulate(RunConfig.model_validate(
        {"cache_only": True, "engine": {"sample_interval_s": None}}), requests)
    assert off.timeseries.empty
    assert not any(key.startswith("timeseries") for key in off.summary)


def test_row_cap_coarsens_the_interval(cache_class):
    """10 s sampled every 0.1 ms would be 100,001 rows: sampled every 0.2 ms instead, with
    the timed mode's warning."""
    requests = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 10.0, 8, 1, (3, 4), 4)]
    result = simulate(RunConfig.model_validate(
        {"cache_only": True, "engine": {"sample_interval_s": 1e-4}}), requests)
    assert result.summary["timeseries_interval_s"] == pytest.approx(2e-4)
    assert len(result.timeseries) == result.summary["timeseries_rows"] <= 100_000
    assert "instead of 0.0001 s" in result.summary["timeseries_warning"]
    assert result.timeseries["cached_tokens"].iloc[-1] == 16  # t = 10 s: both arrived
    assert result.timeseries["cached_tokens"].iloc[-2] == 8


@pytest.mark.parametrize("now,interval,expected", [
    (0.0, 1.0, 0.0), (0.5, 1.0, 1.0), (1.0, 1.0, 1.0), (0.3, 0.1, 3 * 0.1), (2.0, 0.3, 7 * 0.3),
])
def test_next_sample_is_the_first_grid_point_at_or_after(now, interval, expected):
    assert next_sample(now, interval) == expected
    assert next_sample(now, interval) >= now


def test_run_cache_only_writes_timeseries(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(
        f'{{"timestamp": {1000 * i}, "input_length": 1000, "output_length": 4, '
        f'"hash_ids": [{i}, {100 + i}]}}\n' for i in range(5)))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--trace", str(trace), "--cache-only",
                                      "--sample-interval", "2", "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "timeseries.parquet")
    assert frame["time_s"].tolist() == [0.0, 2.0, 4.0]
    assert frame["cached_tokens"].tolist() == [1000, 3000, 5000]


def test_radix_and_segment_rows_match_on_a_ttl_cache():
    """The raw state rows themselves agree: arrivals 0, 0.7, ..., 7.7 (7.000000000000001 for
    0.7 * 10) cross 0, 1, ..., 7 (at 0.7, 1.4, 2.1, 3.5, 4.2, 5.6, 6.3, 7.0...1), and the
    last row is taken at the next grid point, 8."""
    requests = [Request(i, 0.7 * i, 8, 1, (i % 3 + 1, 10 + i), 4) for i in range(12)]
    rows = [replay_cache_only(requests, cls(16, POLICIES.build("lru"), TTLRule(1.5)),
                              sample_interval_s=1.0).states
            for cls in (RadixCache, SegmentCache)]
    assert rows[0] == rows[1]
    assert [r[0] for r in rows[0]] == [float(k) for k in range(9)]


@given(st.lists(st.tuples(st.floats(0.0, 30.0), st.lists(st.integers(1, 6), min_size=1,
                                                            max_size=4)),
                min_size=1, max_size=25),
       st.sampled_from([0.5, 3.0]), st.sampled_from([None, 40]),
       st.sampled_from([0.25, 1.0, 7.0]), st.booleans())
@settings(max_examples=60, deadline=None)
def test_sampling_under_a_ttl_changes_no_record_and_empties_the_cache(points, ttl, capacity,
                                                                      interval, host):
    """Freeing the pages dead by each grid point (engine/cache_samples.py gap_rows) changes
    no record and no count against a run that samples nothing, on the chunk replay and (a
    host tier) the step-by-step one; and no row shows a page past its deadline: a sample
    after every deadline of a gap with no arrival shows nothing resident."""
    points = sorted(points)
    requests = [Request(i, t, 4 * len(ids), 1, tuple(chain_ids(ids)), 4)
                for i, (t, ids) in enumerate(points)]
    base = {"cache_only": True, "cache": {"capacity_tokens": capacity, "ttl_s": ttl,
                                          **({"host_capacity_tokens": 64} if host else {})}}
    sampled = simulate(RunConfig.model_validate(
        {**base, "engine": {"sample_interval_s": interval}}), requests)
    plain = simulate(RunConfig.model_validate(
        {**base, "engine": {"sample_interval_s": None}}), requests)
    assert sampled.requests.equals(plain.requests)
    for key in ("cache_expirations", "cache_evictions", "cache_hit_tokens",
                "cache_expired_age_p50_s", "cache_peak_tokens"):
        assert sampled.summary[key] == plain.summary[key], key
    series = sampled.timeseries
    last = max(t for t, _ in points)
    for time_s, tokens in zip(series["time_s"], series["cached_tokens"], strict=True):
        if time_s > last + ttl and time_s < series["time_s"].iloc[-1]:
            assert tokens == 0, (time_s, tokens)
        gap = [t for t, _ in points if t <= time_s]
        if gap and time_s > max(gap) + ttl and any(t > time_s for t, _ in points):
            assert tokens == 0, (time_s, tokens)  # every page seen so far is past its TTL


def chain_ids(ids: list[int]) -> list[int]:
    """Chained page ids of a prompt made of blocks `ids` (each prefix its own id)."""
    out, key = [], 0
    for block in ids:
        key = key * 7 + block
        out.append(key)
    return out
